//! Temperatures of NICs and CPUs from hwmon (`/sys/class/hwmon/hwmonN`,
//! millidegrees Celsius). A NIC is recognised by its sensor name (mlx5,
//! ixgbe, ...) or by `device/uevent` naming the PCI address of an inspected
//! NIC. Other sensors (disks, ACPI zones) are ignored: they do not limit a
//! network test.

use crate::report::{Evidence, Finding, Severity, Temperature};
use crate::Ctx;

const HWMON_DIR: &str = "sys/class/hwmon";

/// hwmon names NIC drivers register (bnxt registers `bnxt_en`).
const NIC_SENSORS: [&str; 9] = [
    "mlx5", "mlx4", "ixgbe", "i40e", "ice", "bnxt", "bnxt_en", "igb", "tg3",
];
const CPU_SENSORS: [&str; 4] = ["k10temp", "coretemp", "zenpower", "cpu_thermal"];

/// Within this many °C of the critical limit is a warning.
const MARGIN_C: f64 = 10.0;

pub(crate) fn check(ctx: &mut Ctx) {
    let chips = ctx.host.list_dirs(HWMON_DIR, |n| n.starts_with("hwmon"));
    if chips.is_empty() {
        ctx.skip("temperatures: no /sys/class/hwmon/hwmonN");
        return;
    }
    for chip in chips {
        let dir = format!("{HWMON_DIR}/{chip}");
        let Some(name) = ctx.host.read_trimmed(&format!("{dir}/name")) else {
            continue;
        };
        let Some((kind, nic)) = classify(ctx, &dir, &name) else {
            continue;
        };
        let inputs = ctx
            .host
            .list_files(&dir, |n| n.starts_with("temp") && n.ends_with("_input"));
        for input in inputs {
            let Some(sensor) = input.strip_suffix("_input") else {
                continue;
            };
            read_sensor(ctx, &dir, &chip, &name, sensor, kind, nic.as_deref());
        }
    }
}

/// `("nic", Some(iface))`, `("cpu", None)` or `None` for sensors we ignore.
fn classify(ctx: &Ctx, dir: &str, name: &str) -> Option<(&'static str, Option<String>)> {
    if CPU_SENSORS.contains(&name) {
        return Some(("cpu", None));
    }
    let pci = ctx
        .host
        .read_trimmed(&format!("{dir}/device/uevent"))
        .and_then(|u| {
            u.lines().find_map(|l| {
                l.strip_prefix("PCI_SLOT_NAME=")
                    .map(|v| v.trim().to_string())
            })
        });
    let nic = pci.and_then(|pci| {
        ctx.facts
            .nics
            .iter()
            .find(|n| n.pci_address.as_deref() == Some(pci.as_str()))
            .map(|n| n.name.clone())
    });
    if nic.is_some() || NIC_SENSORS.contains(&name) {
        return Some(("nic", nic));
    }
    None
}

fn millidegrees(ctx: &Ctx, rel: &str) -> Option<(f64, Evidence)> {
    let (value, ev) = ctx.read_ev(rel)?;
    let milli: i64 = value.parse().ok()?;
    Some((milli as f64 / 1000.0, ev))
}

fn read_sensor(
    ctx: &mut Ctx,
    dir: &str,
    chip: &str,
    name: &str,
    sensor: &str,
    kind: &'static str,
    nic: Option<&str>,
) {
    let Some((celsius, input_ev)) = millidegrees(ctx, &format!("{dir}/{sensor}_input")) else {
        return;
    };
    let crit = millidegrees(ctx, &format!("{dir}/{sensor}_crit"));
    let max = millidegrees(ctx, &format!("{dir}/{sensor}_max"));
    let label = ctx
        .host
        .read_trimmed(&format!("{dir}/{sensor}_label"))
        .unwrap_or_else(|| sensor.to_string());
    ctx.facts.temperatures.push(Temperature {
        sensor: name.to_string(),
        kind: kind.to_string(),
        nic: nic.map(str::to_string),
        label: label.clone(),
        celsius,
        crit_celsius: crit.as_ref().map(|(c, _)| *c),
        max_celsius: max.as_ref().map(|(m, _)| *m),
    });
    // Prefer crit; a sensor with only max uses max as the limit.
    let Some((limit, limit_ev)) = crit.clone().or(max.clone()) else {
        ctx.skip(format!(
            "temperature {chip}/{sensor} ({name}): no {sensor}_crit or {sensor}_max limit"
        ));
        return;
    };
    let over_max = max.as_ref().is_some_and(|(m, _)| celsius >= *m);
    let severity = if celsius >= limit {
        Severity::Critical
    } else if celsius >= limit - MARGIN_C || over_max {
        Severity::Warning
    } else {
        return;
    };
    let mut evidence_list = vec![input_ev, limit_ev];
    if let (Some((_, max_ev)), true) = (&max, crit.is_some() && over_max) {
        evidence_list.push(max_ev.clone());
    }
    let who = match (kind, nic) {
        ("nic", Some(nic)) => format!("{nic} ({name} {label})"),
        ("nic", None) => format!("NIC sensor {name} {label} ({chip})"),
        _ => format!("CPU sensor {name} {label}"),
    };
    let relation = if celsius >= limit {
        "at or above"
    } else {
        "close to"
    };
    let limit_name = if crit.is_some() { "critical" } else { "max" };
    let (id, impact, fix) = advice(kind);
    ctx.add(Finding {
        id: id.into(),
        severity,
        title: format!("{who} at {celsius:.1} °C, {relation} its {limit_name} {limit:.1} °C"),
        evidence: evidence_list,
        impact: impact.into(),
        fix: fix.into(),
        subject: Some(nic.map_or_else(|| format!("{name}/{chip}"), str::to_string)),
    });
}

/// A hot sensor's finding id, impact and fix: a NIC's (`kind` "nic") or
/// a CPU's.
fn advice(kind: &str) -> (&'static str, &'static str, &'static str) {
    if kind == "nic" {
        (
            "nic_temperature_high",
            "NICs throttle, flap the link or shut down near their limit, and drop packets \
             before that; a card this hot at idle gets hotter under load.",
            "Give the card airflow (many NICs expect rack-server airflow: add a fan aimed \
             at its heatsink), check heatsink contact, and re-check under load.",
        )
    } else {
        (
            "cpu_temperature_high",
            "The CPU lowers its clock near this limit; per-core throughput falls during \
             long tests and results drift.",
            "Improve CPU cooling (cooler mounting, fan curve, case airflow) and re-check \
             under load.",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensor_lists_are_lowercase_names() {
        assert!(NIC_SENSORS
            .iter()
            .all(|n| n.chars().all(|c| !c.is_uppercase())));
        assert!(CPU_SENSORS.contains(&"k10temp"));
    }
}
