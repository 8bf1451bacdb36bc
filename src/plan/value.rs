//! Reading the toml crate's spanned document tree: typed getters whose
//! errors point at the value, unknown-key checks with a suggestion, and the
//! conversion of a test's command options into [`PlanArg`]s.

use super::{PlanArg, PlanError, Span};
use toml::de::{DeString, DeTable, DeValue};
use toml::Spanned;

pub(super) type Value<'i> = Spanned<DeValue<'i>>;
pub(super) type Key<'i> = Spanned<DeString<'i>>;

/// The file being parsed: everything an error needs to say where it is.
#[derive(Clone, Copy)]
pub(super) struct Src<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

impl Src<'_> {
    pub fn err(&self, span: Span, message: impl std::fmt::Display) -> PlanError {
        let (line, column) = super::locate(self.text, span.start);
        PlanError {
            file: self.file.to_string(),
            line,
            column,
            message: message.to_string(),
        }
    }

    /// The end of the text: where a missing section would be added.
    pub fn end(&self) -> Span {
        Span::at(self.text.len())
    }

    pub fn string(&self, v: &Value, what: &str) -> Result<String, PlanError> {
        match v.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            other => Err(self.wrong_type(v, other, what, "a string")),
        }
    }

    /// A string that must not be empty or contain control characters.
    pub fn text_value(&self, v: &Value, what: &str) -> Result<String, PlanError> {
        let s = self.string(v, what)?;
        if s.trim().is_empty() {
            return Err(self.err(
                span(v),
                format!("{what} is empty: give a value or remove the key"),
            ));
        }
        if s.chars().any(char::is_control) {
            return Err(self.err(
                span(v),
                format!("{what} contains a control character: remove it"),
            ));
        }
        Ok(s)
    }

    pub fn bool(&self, v: &Value, what: &str) -> Result<bool, PlanError> {
        match v.get_ref() {
            DeValue::Boolean(b) => Ok(*b),
            other => Err(self.wrong_type(v, other, what, "true or false")),
        }
    }

    /// An integer in `lo..=hi`.
    pub fn int(&self, v: &Value, what: &str, lo: i64, hi: i64) -> Result<i64, PlanError> {
        let n = match v.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok(),
            other => return Err(self.wrong_type(v, other, what, "an integer")),
        };
        match n {
            Some(n) if (lo..=hi).contains(&n) => Ok(n),
            _ => Err(self.err(
                span(v),
                format!("{what} must be {lo}..={hi}: give a number in that range"),
            )),
        }
    }

    pub fn table<'v, 'i>(
        &self,
        v: &'v Value<'i>,
        what: &str,
    ) -> Result<&'v DeTable<'i>, PlanError> {
        match v.get_ref() {
            DeValue::Table(t) => Ok(t),
            other => Err(self.wrong_type(v, other, what, "a table")),
        }
    }

    /// One string or an array of strings, each with its position.
    pub fn strings(&self, v: &Value, what: &str) -> Result<Vec<Spanned<String>>, PlanError> {
        match v.get_ref() {
            DeValue::String(s) => Ok(vec![Spanned::new(v.span(), s.to_string())]),
            DeValue::Array(a) => a
                .iter()
                .map(|e| Ok(Spanned::new(e.span(), self.string(e, what)?)))
                .collect(),
            other => Err(self.wrong_type(v, other, what, "a string or an array of strings")),
        }
    }

    fn wrong_type(&self, v: &Value, found: &DeValue, what: &str, want: &str) -> PlanError {
        self.err(
            span(v),
            format!("{what} must be {want}, not {}", article(found.type_str())),
        )
    }

    /// Rejects a key of `table` that is not in `known`, suggesting the closest.
    pub fn check_keys(
        &self,
        table: &DeTable,
        known: &[&str],
        place: &str,
    ) -> Result<(), PlanError> {
        match entries(table)
            .into_iter()
            .find(|(k, _)| !known.contains(&k.get_ref().as_ref()))
        {
            None => Ok(()),
            Some((k, _)) => Err(self.err(span(k), unknown_key(k.get_ref(), place, known))),
        }
    }

    /// A test's command option: everything a [[test]] has that the plan does not own.
    pub fn arg(&self, key: &Key, v: &Value) -> Result<Option<PlanArg>, PlanError> {
        let name = key.get_ref().as_ref();
        if !is_option_key(name) {
            let hint = if name.contains('-') {
                format!("write '{}' (with _ for -)", name.replace('-', "_"))
            } else {
                "use the command's option name with _ for - (e.g. frame_size)".to_string()
            };
            return Err(self.err(
                span(key),
                format!("'{name}' is not a command option: {hint}"),
            ));
        }
        let values = match v.get_ref() {
            DeValue::Boolean(true) => Vec::new(),
            DeValue::Boolean(false) => return Ok(None),
            DeValue::Array(a) if a.is_empty() => return Ok(None),
            DeValue::Array(a) => a
                .iter()
                .map(|e| self.scalar(name, e))
                .collect::<Result<_, _>>()?,
            _ => vec![self.scalar(name, v)?],
        };
        Ok(Some(PlanArg {
            key: name.to_string(),
            flag: format!("--{}", name.replace('_', "-")),
            values,
            span: span(key),
            value_span: span(v),
        }))
    }

    /// A string, integer or float as the command line would spell it.
    pub(super) fn scalar(&self, key: &str, v: &Value) -> Result<String, PlanError> {
        match v.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
                .map(|n| n.to_string())
                .map_err(|_| self.err(span(v), format!("{key}: this integer is too large"))),
            DeValue::Float(f) => match f.as_str().parse::<f64>() {
                // Display prints the shortest text that parses back to the same f64.
                Ok(x) if x.is_finite() => Ok(x.to_string()),
                _ => Err(self.err(span(v), format!("{key} must be a finite number"))),
            },
            DeValue::Boolean(_) => Err(self.err(
                span(v),
                format!("{key}: a list of true/false means nothing; write {key} = true or false"),
            )),
            other => Err(self.err(
                span(v),
                format!(
                    "{key} cannot be {}: command options take a string, a number, true/false \
                     or an array of strings or numbers",
                    article(other.type_str())
                ),
            )),
        }
    }
}

pub(super) fn span<T>(v: &Spanned<T>) -> Span {
    v.span().into()
}

/// A table's entries in file order (the toml crate sorts them by key).
pub(super) fn entries<'t, 'i>(table: &'t DeTable<'i>) -> Vec<(&'t Key<'i>, &'t Value<'i>)> {
    let mut all: Vec<_> = table.iter().collect();
    all.sort_by_key(|(k, _)| k.span().start);
    all
}

/// `frame_size`: what becomes `--frame-size`.
pub(super) fn is_option_key(k: &str) -> bool {
    k.starts_with(|c: char| c.is_ascii_lowercase())
        && k.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !k.ends_with('_')
        && !k.contains("__")
}

fn article(type_name: &str) -> String {
    match type_name {
        "integer" | "array" => format!("an {type_name}"),
        other => format!("a {other}"),
    }
}

pub(super) fn unknown_key(key: &str, place: &str, known: &[&str]) -> String {
    match suggest(key, known.iter().copied()) {
        Some(s) => format!("unknown key '{key}' {place}; did you mean '{s}'?"),
        None => format!(
            "unknown key '{key}' {place}: the keys here are {}",
            known.join(", ")
        ),
    }
}

/// The candidate closest to `word`, if it is close enough to be a typo.
pub fn suggest<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let limit = 2.max(word.chars().count() / 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, case-insensitive.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
