//! A test's `sweep` table (issue 21) and the plan's `[lab]`: what they say
//! and where, checked as far as the plan alone can (keys, lists, zip
//! lengths, the cap). Each value is checked by the command's own parser
//! later, in `cli::plan_config`, which points back at it.
//!
//! ```toml
//! [lab]
//! dut = "route"
//! [[test]]
//! name = "seed001"
//! kind = "search"
//! sweep = { profile = ["bench-var2-64b", "bench-var2-1514b"], bidir = [false, true], dut = ["route", "nat"] }
//! order = ["dut", "profile", "bidir"]
//! rows = ["profile", "bidir"]
//! cols = ["dut"]
//! ```

use super::value::{entries, is_option_key, span, Key, Src, Value};
use super::{PlanArg, PlanAxis, PlanError, PlanHost, PlanLab, PlanSweep, PlanTest, Span};
use crate::model::sweep::{Axis, SweepError, SweepSpec};
use toml::de::{DeTable, DeValue};

/// `[lab]` keys: the `linerate lab` flags that say what lab to build. A
/// test may sweep them too; the lab is then built once per setting.
pub const LAB_KEYS: &[&str] = &[
    "dut",
    "fw_rules",
    "mtu",
    "queues",
    "dut_loss",
    "dut_police",
    "dut_shape",
    "dut_remark",
    "dut_delay",
    "dut_jitter",
    "dut_reorder",
    "stick_vlans",
    // The DUT in a VM: `dut_vm = true`, its kernel, vCPUs, memory and
    // accelerator.
    "dut_vm",
    "dut_kernel",
    "dut_vcpus",
    "dut_memory",
    "vm_accel",
    "dut_bond",
    // The user's own router VM: its image, or its kernel (dut_kernel) and
    // initramfs, extra kernel arguments, and how long it may take.
    "dut_image",
    "dut_initrd",
    "dut_append",
    "dut_boot_wait",
];

/// The lab's generator and sink addresses (its route/nat/fw addressing).
const LAB_GEN: [u8; 4] = [198, 18, 0, 1];
const LAB_SINK: [u8; 4] = [198, 19, 0, 1];

pub(super) fn parse_lab(src: Src, v: &Value) -> Result<PlanLab, PlanError> {
    let t = src.table(v, "lab")?;
    src.check_keys(t, LAB_KEYS, "in [lab]")?;
    let mut settings = Vec::new();
    for (key, value) in entries(t) {
        settings.extend(src.arg(key, value)?);
    }
    Ok(PlanLab {
        settings,
        span: span(v),
    })
}

/// The hosts of a plan with `[lab]`: the lab's gen and sink namespaces.
pub(super) fn lab_hosts() -> Vec<PlanHost> {
    let host = |name: &str, a: [u8; 4]| PlanHost {
        name: name.into(),
        kind: super::HostKind::Lab,
        linerate: None,
        ports: vec![],
        address: Some(std::net::IpAddr::from(a)),
        iperf3_server: None,
        span: Span::default(),
    };
    vec![host("gen", LAB_GEN), host("sink", LAB_SINK)]
}

/// The keys that only mean something beside `sweep`.
const COMPANIONS: [&str; 5] = ["zip", "order", "rows", "cols", "cell"];

pub(super) fn parse_sweep(
    src: Src,
    t: &DeTable,
    place: &str,
    args: &[PlanArg],
) -> Result<Option<PlanSweep>, PlanError> {
    let Some((sweep_key, sweep_value)) = t.get_key_value("sweep") else {
        if let Some((k, _)) = entries(t)
            .into_iter()
            .find(|(k, _)| COMPANIONS.contains(&k.get_ref().as_ref()))
        {
            return Err(src.err(
                span(k),
                format!(
                    "{} in {place} only means something with a sweep: add sweep = {{ KEY = [V1, V2] }}, or remove it",
                    k.get_ref().as_ref()
                ),
            ));
        }
        return Ok(None);
    };
    let table = match sweep_value.get_ref() {
        DeValue::Table(t) => t,
        _ => {
            return Err(src.err(
                span(sweep_value),
                format!(
                    "sweep in {place} must be a table of lists, e.g. sweep = {{ frame_size = [64, 1518] }}"
                ),
            ))
        }
    };
    let axes = entries(table)
        .into_iter()
        .map(|(key, value)| parse_axis(src, key, value, place, args))
        .collect::<Result<Vec<_>, PlanError>>()?;
    if axes.is_empty() {
        return Err(src.err(
            span(sweep_value),
            format!("sweep in {place} is empty: add KEY = [V1, V2]"),
        ));
    }
    let swept = Swept {
        src,
        place,
        axes: &axes,
        names: axes
            .iter()
            .map(|a| a.key.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    };
    let order = swept.list(t, "order")?;
    let rows = swept.list(t, "rows")?;
    let cols = swept.list(t, "cols")?;
    let cell = t
        .get("cell")
        .map(|v| src.text_value(v, "cell"))
        .transpose()?;
    let zip_span = t.get("zip").map_or(span(sweep_value), span);
    let zip = swept.zip(t)?;
    let s = PlanSweep {
        axes,
        zip,
        order,
        rows,
        cols,
        cell,
        span: span(sweep_key),
        zip_span,
    };
    check_expansion(src, t, place, &s)?;
    Ok(Some(s))
}

/// The sweep expands (zip lengths, repeats and the like); an error points
/// at the zip, the order or the sweep.
fn check_expansion(src: Src, t: &DeTable, place: &str, s: &PlanSweep) -> Result<(), PlanError> {
    s.spec("").count().map(drop).map_err(|e| {
        let at = match e {
            SweepError::OrderTwice(_) => t.get("order").map_or(s.span, span),
            SweepError::ZipLengths { .. } | SweepError::ZipAlone(_) | SweepError::ZipTwice(_) => {
                s.zip_span
            }
            _ => s.span,
        };
        src.err(at, format!("in {place}: {e}"))
    })
}

/// One axis of a sweep: the command option `key` and its list of values.
fn parse_axis(
    src: Src,
    key: &Key,
    value: &Value,
    place: &str,
    args: &[PlanArg],
) -> Result<PlanAxis, PlanError> {
    let k = key.get_ref().as_ref();
    if !is_option_key(k) {
        return Err(src.err(
            span(key),
            format!("'{k}' in sweep is not a command option: use its name with _ for - (e.g. frame_size)"),
        ));
    }
    if args.iter().any(|a| a.key == k) {
        return Err(src.err(
            span(key),
            format!("{k} is both set and swept in {place}: keep it in one place"),
        ));
    }
    let DeValue::Array(list) = value.get_ref() else {
        return Err(src.err(
            span(value),
            format!("sweep {k} must be a list of values, e.g. {k} = [a, b]"),
        ));
    };
    if list.is_empty() {
        return Err(src.err(
            span(value),
            format!("sweep {k} is empty: give at least one value"),
        ));
    }
    let values = list
        .iter()
        .map(|e| {
            let text = match e.get_ref() {
                DeValue::Boolean(b) => b.to_string(),
                _ => src.scalar(k, e)?,
            };
            Ok((text, span(e)))
        })
        .collect::<Result<Vec<_>, PlanError>>()?;
    Ok(PlanAxis {
        key: k.to_string(),
        flag: format!("--{}", k.replace('_', "-")),
        values,
        span: span(key),
    })
}

/// Reads the keys that name swept keys (`order`, `rows`, `cols`, `zip`),
/// each name checked where it is written.
struct Swept<'a> {
    src: Src<'a>,
    place: &'a str,
    axes: &'a [PlanAxis],
    /// The swept keys, as errors list them.
    names: String,
}

impl Swept<'_> {
    /// `s`, written in `k`, if the sweep has it as an axis.
    fn check(&self, k: &str, s: toml::Spanned<String>) -> Result<String, PlanError> {
        let name = s.get_ref().clone();
        if self.axes.iter().any(|a| a.key == name) {
            Ok(name)
        } else {
            Err(self.src.err(
                span(&s),
                format!(
                    "{k} names '{name}', which {} does not sweep (it sweeps {})",
                    self.place, self.names
                ),
            ))
        }
    }

    /// The list of swept keys `k` of `t` (empty when not set).
    fn list(&self, t: &DeTable, k: &str) -> Result<Vec<String>, PlanError> {
        let Some(v) = t.get(k) else {
            return Ok(vec![]);
        };
        self.src
            .strings(v, k)?
            .into_iter()
            .map(|s| self.check(k, s))
            .collect()
    }

    /// `zip`'s groups of swept keys (none when not set).
    fn zip(&self, t: &DeTable) -> Result<Vec<Vec<String>>, PlanError> {
        let src = self.src;
        let Some(v) = t.get("zip") else {
            return Ok(vec![]);
        };
        let DeValue::Array(groups) = v.get_ref() else {
            return Err(src.err(
                span(v),
                "zip is a list of groups: zip = [[\"frame_size\", \"rate\"]]",
            ));
        };
        groups
            .iter()
            .map(|g| {
                if !matches!(g.get_ref(), DeValue::Array(_)) {
                    return Err(src.err(
                        span(g),
                        "each zip group is a list: zip = [[\"frame_size\", \"rate\"]]",
                    ));
                }
                src.strings(g, "zip")?
                    .into_iter()
                    .map(|s| self.check("zip", s))
                    .collect()
            })
            .collect()
    }
}

impl PlanSweep {
    /// The sweep to expand, named `name`.
    pub fn spec(&self, name: &str) -> SweepSpec {
        SweepSpec {
            name: name.to_string(),
            axes: self
                .axes
                .iter()
                .map(|a| Axis {
                    key: a.key.clone(),
                    values: a.values.iter().map(|(v, _)| v.clone()).collect(),
                })
                .collect(),
            zip: self.zip.clone(),
            order: self.order.clone(),
        }
    }
}

/// The plan's tests, sweeps expanded, stay within [`super::MAX_TESTS`].
pub(super) fn check_count(src: Src, tests: &[PlanTest]) -> Result<(), PlanError> {
    let mut total: u128 = 0;
    for t in tests {
        let n = match &t.sweep {
            Some(s) => s.spec(&t.name).count().unwrap_or(1),
            None => 1,
        };
        total = total.saturating_add(n);
        if total > super::MAX_TESTS as u128 {
            let at = t.sweep.as_ref().map_or(t.span, |s| s.span);
            return Err(src.err(
                at,
                format!(
                    "with its sweeps expanded the plan has more than {} tests (\"{}\" alone has {n} points): \
                     sweep fewer values, zip parameters that move together, or split the plan",
                    super::MAX_TESTS,
                    t.name
                ),
            ));
        }
    }
    Ok(())
}
