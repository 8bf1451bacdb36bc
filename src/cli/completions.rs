//! `linerate completions SHELL` and `linerate man`: shell completions and
//! man pages generated from the clap definitions, so they never disagree
//! with the flags the binary takes.

use super::Cli;
use crate::model::stderr::errln;
use anyhow::{anyhow, Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::Shell;
use std::path::{Path, PathBuf};

/// Flags of `linerate completions`.
#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell to complete for (bash, zsh, fish, elvish, powershell).
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Flags of `linerate man`.
#[derive(Args, Debug, Clone)]
pub struct ManArgs {
    /// The command whose page to print (e.g. tcp); default: linerate(1).
    #[arg(value_name = "COMMAND", conflicts_with = "dir")]
    pub command: Option<String>,
    /// Write every page (linerate.1 and linerate-COMMAND.1 for each command) into DIR
    /// instead of printing one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The command tree as clap builds it (display names like `linerate-tcp`
/// set), without the `help` subcommand, which has no page of its own.
fn command() -> clap::Command {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// `linerate completions SHELL`: the script on stdout.
pub fn completions(a: &CompletionsArgs) -> i32 {
    let mut cmd = command();
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "linerate", &mut script);
    match crate::model::stdout::write_to(&mut std::io::stdout().lock(), &script) {
        Ok(()) => 0,
        Err(e) => {
            errln!("error: writing the completion script to stdout: {e}");
            1
        }
    }
}

/// `linerate man`: one page on stdout, or every page into `--dir`.
pub fn man(a: &ManArgs) -> i32 {
    let r = match &a.dir {
        Some(dir) => write_pages(dir).map(|written| {
            for p in written {
                errln!("wrote {}", p.display());
            }
        }),
        None => print_page(a.command.as_deref()),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            errln!("error: {e:#}");
            // A command that does not exist is a usage error.
            2
        }
    }
}

fn print_page(name: Option<&str>) -> Result<()> {
    let root = command();
    let cmd = match name {
        None => root,
        Some(n) => root.find_subcommand(n).cloned().ok_or_else(|| {
            let names: Vec<&str> = root.get_subcommands().map(|c| c.get_name()).collect();
            anyhow!(
                "linerate has no command '{n}'; pages exist for: {}",
                names.join(", ")
            )
        })?,
    };
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut page)
        .context("rendering the man page")?;
    crate::model::stdout::write_to(&mut std::io::stdout().lock(), &page)
        .context("writing the man page to stdout")
}

/// Writes linerate.1 and a page per (visible) command into `dir`; returns
/// the files written.
pub fn write_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "creating {} for the man pages (choose another with --dir)",
            dir.display()
        )
    })?;
    let root = command();
    let mut written = Vec::new();
    let pages = std::iter::once(root.clone())
        .chain(root.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    for cmd in pages {
        let man = clap_mangen::Man::new(cmd);
        let path = dir.join(man.get_filename());
        let mut page = Vec::new();
        man.render(&mut page)
            .with_context(|| format!("rendering {}", path.display()))?;
        crate::model::files::write_atomic(&path, &page)
            .with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
