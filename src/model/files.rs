//! Files written so that a crash never leaves half of one (temp file,
//! fsync, rename, fsync of the directory), and so that a symlink someone
//! planted is never followed: every file linerate writes is created new
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`), never opened where it already stands.

use crate::model::error::{fail, Context, ModelError, Step};

type Result<T, E = ModelError> = std::result::Result<T, E>;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates `path` as a new file for writing. Fails when anything stands
/// there already, a symlink included (`O_EXCL` never follows one, and
/// `O_NOFOLLOW` says so twice).
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(path)
}

/// Opens a scratch file in `dir` for reading and writing that no other
/// process can open and that vanishes when it is closed, even after a
/// SIGKILL: `O_TMPFILE` where the filesystem has it, else a new file
/// (`O_EXCL|O_NOFOLLOW`) removed at once.
pub fn scratch_file(dir: &Path) -> io::Result<File> {
    let unnamed = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir);
    match unnamed {
        Ok(f) => return Ok(f),
        // Filesystems without O_TMPFILE say EOPNOTSUPP or EISDIR.
        Err(e)
            if e.raw_os_error() == Some(libc::EOPNOTSUPP)
                || e.raw_os_error() == Some(libc::EISDIR) => {}
        Err(e) => return Err(e),
    }
    let mut attempt = 0u32;
    loop {
        let path = dir.join(format!(".linerate-scratch{}-{attempt}", std::process::id()));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => {
                fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Opens an append-only log: created new, or (when this run opened it
/// before) appended to if it is a regular file. A symlink is refused
/// (`ELOOP`), whatever it points at.
pub fn open_log(path: &Path) -> io::Result<File> {
    let append = |create: bool| {
        OpenOptions::new()
            .append(true)
            .create_new(create)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o644)
            .open(path)
    };
    let f = match append(true) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => append(false)?,
        r => r?,
    };
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Writes `bytes` to `path` atomically: a new temp file beside it, fsync,
/// rename over `path` (which replaces a symlink there, never writes through
/// it), fsync of the directory. On any failure the temp file is removed and
/// the error names the file and the system's reason (e.g. "No space left on
/// device (os error 28)"); what stood at `path` before is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let mut attempt = 0u32;
    let (tmp, mut f) = loop {
        let tmp = dir.join(format!(".{name}.tmp{}-{attempt}", std::process::id()));
        match create_new(&tmp) {
            Ok(f) => break (tmp, f),
            // A name taken (by a planted file or an earlier crash): the next.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => {
                return Err(Step::new(format!("creating {}", tmp.display()), e).into());
            }
        }
    };
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))
        .and_then(|()| {
            fs::rename(&tmp, path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
        });
    drop(f);
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e.into());
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Makes `base` (creating what is missing) a place where another user
/// cannot redirect what linerate writes, and returns it. Walks the path a
/// component at a time without following a link it has not checked:
///
/// - in a directory other users may write (world- or group-writable, or
///   owned by another user than this one or root: `/tmp`, a 1777 working
///   directory), a component must be owned by this user or root, and that
///   directory must be sticky (else anyone may rename what stands there);
///   a symlink there is followed only under the same rule;
/// - elsewhere symlinks are followed as usual (`/home` → `/data/home`);
/// - the base itself may not be writable by others unless it is sticky.
///
/// Trusted users are this one, root, and under sudo the user who ran it.
/// Together with run directories made by `mkdir` (never reused) and files
/// created `O_EXCL|O_NOFOLLOW`, no link planted on the path is written
/// through: the chain up to the base is one nobody else can change.
pub fn trusted_dir(base: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = crate::sys::euid();
    // Under sudo the user who asked is trusted too: `sudo linerate lab` in
    // one's own home directory writes where that user could anyway.
    let sudo_uid: Option<u32> = (me == 0)
        .then(|| std::env::var("SUDO_UID").ok()?.parse().ok())
        .flatten();
    let trusted = |uid: u32| uid == me || uid == 0 || Some(uid) == sudo_uid;
    let shared = |m: &fs::Metadata| m.mode() & 0o022 != 0 || !trusted(m.uid());
    let sticky = |m: &fs::Metadata| m.mode() & 0o1000 != 0;
    let start = if base.is_absolute() {
        std::path::PathBuf::from("/")
    } else {
        std::env::current_dir().context("reading the current directory")?
    };
    let mut cur = start;
    let mut hops = 0;
    let mut rest = names_reversed(base);
    while let Some(name) = rest.pop() {
        if name == ".." {
            cur.pop();
            continue;
        }
        let parent = fs::metadata(&cur).with_context(|| format!("reading {}", cur.display()))?;
        let next = cur.join(&name);
        let m = stat_or_create(&next)?;
        if shared(&parent) && !(trusted(m.uid()) && sticky(&parent)) {
            let owner = (!trusted(m.uid())).then(|| m.uid());
            let link = m.file_type().is_symlink();
            return Err(redirectable(&next, &cur, link, owner, sticky(&parent)));
        }
        if m.file_type().is_symlink() {
            hops += 1;
            if hops > 40 {
                fail!("{}: too many levels of symlinks", base.display());
            }
            let target =
                fs::read_link(&next).with_context(|| format!("reading {}", next.display()))?;
            if target.is_absolute() {
                cur = std::path::PathBuf::from("/");
            }
            rest.extend(names_reversed(&target));
            continue;
        }
        if !m.is_dir() {
            fail!("{} is not a directory", next.display());
        }
        cur = next;
    }
    // The base itself holds the run directory: others writing there may
    // not rename it away and put something else in its place.
    let m = fs::metadata(&cur).with_context(|| format!("reading {}", cur.display()))?;
    if shared(&m) && !sticky(&m) {
        fail!(
            "{} can be written by other users and is not sticky: anyone may rename a run \
             directory there and put a link in its place. Use a directory only you (or root) \
             control (--results-dir), or chmod +t or go-w it",
            cur.display()
        );
    }
    Ok(())
}

/// The names of `p`'s components, `..` kept, last first (a stack of what
/// is left to walk).
fn names_reversed(p: &Path) -> Vec<std::ffi::OsString> {
    p.components()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n.to_os_string()),
            std::path::Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .rev()
        .collect()
}

/// What stands at `next` (not following a symlink), creating a directory
/// there when nothing does.
fn stat_or_create(next: &Path) -> Result<fs::Metadata> {
    match fs::symlink_metadata(next) {
        Ok(m) => Ok(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match fs::create_dir(next) {
                Ok(()) => {}
                // Made by someone else meanwhile: judged below.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Step::new(format!("creating {}", next.display()), e).into()),
            }
            Ok(
                fs::symlink_metadata(next)
                    .with_context(|| format!("reading {}", next.display()))?,
            )
        }
        Err(e) => Err(Step::new(format!("reading {}", next.display()), e).into()),
    }
}

/// Why `next` (a symlink when `link`, owned by the untrusted uid `owner`
/// if any) in `cur`, a directory other users may write, could redirect
/// results.
fn redirectable(
    next: &Path,
    cur: &Path,
    link: bool,
    owner: Option<u32>,
    sticky: bool,
) -> ModelError {
    let what = if link { "a symlink" } else { "a directory" };
    let owner = match owner {
        None => "".to_string(),
        Some(uid) => format!(" owned by uid {uid}"),
    };
    let how = if sticky {
        "which other users can write"
    } else {
        "which other users can write and which is not sticky (anyone may rename what stands there)"
    };
    ModelError::Failed(format!(
        "{} is {what}{owner} in {}, {how}: results written through it could be \
         redirected to another file. Use a directory only you (or root) control \
         (--results-dir), or remove {} and let linerate create it",
        next.display(),
        cur.display(),
        next.display()
    ))
}

/// Creates the directory `base/stem` new (`mkdir`, which fails where
/// anything stands, a symlink included), or `stem-2`, `stem-3`… when the
/// name is taken: two runs never share a directory.
pub fn create_dir_new(base: &Path, stem: &str) -> Result<std::path::PathBuf> {
    for n in 1..=1000u32 {
        let path = match n {
            1 => base.join(stem),
            n => base.join(format!("{stem}-{n}")),
        };
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Step::new(format!("creating {}", path.display()), e).into()),
        }
    }
    fail!(
        "creating a directory {stem} in {}: the names {stem} to {stem}-1000 are all taken; \
         remove old ones or choose another directory",
        base.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("lr-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = scratch("atomic");
        let p = dir.join("results.json");
        write_atomic(&p, b"{\"a\":1}").unwrap();
        write_atomic(&p, b"{\"a\":2}").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "{\"a\":2}");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "no temp file left");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn planted_symlinks_are_never_followed() {
        let dir = scratch("symlink");
        let victim = dir.join("victim");
        fs::write(&victim, "precious").unwrap();
        // At the file itself: create_new and open_log refuse.
        symlink(&victim, dir.join("intervals.ndjson")).unwrap();
        assert!(create_new(&dir.join("intervals.ndjson")).is_err());
        assert!(open_log(&dir.join("intervals.ndjson")).is_err());
        // At the temp name write_atomic tries first: it takes the next one,
        // and the rename replaces a symlink at the target, not its target.
        let tmp0 = dir.join(format!(".results.json.tmp{}-0", std::process::id()));
        symlink(&victim, &tmp0).unwrap();
        symlink(&victim, dir.join("results.json")).unwrap();
        write_atomic(&dir.join("results.json"), b"{}").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::read_to_string(dir.join("results.json")).unwrap(), "{}");
        assert!(!dir.join("results.json").is_symlink());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn logs_append_to_their_own_file() {
        let dir = scratch("log");
        let p = dir.join("gen.log");
        open_log(&p).unwrap().write_all(b"one\n").unwrap();
        open_log(&p).unwrap().write_all(b"two\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "one\ntwo\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn taken_directory_names_get_a_suffix() {
        let dir = scratch("dirs");
        let a = create_dir_new(&dir, "run").unwrap();
        let b = create_dir_new(&dir, "run").unwrap();
        symlink(&dir, dir.join("run-3")).unwrap();
        let c = create_dir_new(&dir, "run").unwrap();
        assert_eq!(a, dir.join("run"));
        assert_eq!(b, dir.join("run-2"));
        assert_eq!(c, dir.join("run-4"), "a symlink is a taken name");
        fs::remove_dir_all(&dir).unwrap();
    }
}
