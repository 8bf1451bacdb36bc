//! The seed's T1/T2/T3 table from a run's HTTP tests: one row per matrix
//! row (T1.1 … T3.2), Gbit/s and CPU per side; T3 rows on a kernel without
//! the tls ULP say so instead of passing user-space TLS off as kTLS.

use crate::proto::http::KTLS_MISSING;
use crate::results::{RunResults, TestResult, TestStatus};

/// One row's cells, for the terminal and the HTML report.
pub struct Row {
    pub row: String,
    pub test: String,
    pub gbps: String,
    pub requests_per_s: String,
    pub client_cpu: String,
    pub server_cpu: String,
    pub softirq: String,
    pub ktls: String,
    pub note: String,
}

/// The matrix's column names, for the terminal and the HTML report.
pub const HEADER: [&str; 9] = [
    "row",
    "test",
    "Gbit/s",
    "req/s",
    "client CPU",
    "server CPU",
    "softirq",
    "kTLS",
    "note",
];

impl Row {
    /// The row's cells in [`HEADER`]'s order.
    pub fn cells(self) -> [String; 9] {
        [
            self.row,
            self.test,
            self.gbps,
            self.requests_per_s,
            self.client_cpu,
            self.server_cpu,
            self.softirq,
            self.ktls,
            self.note,
        ]
    }
}

pub fn rows(results: &RunResults) -> Vec<Row> {
    results
        .tests
        .iter()
        .filter_map(|t| t.http.as_ref().and_then(|h| h.row.clone()).map(|r| (r, t)))
        .map(|(row, t)| row_of(row, t))
        .collect()
}

fn row_of(row: String, t: &TestResult) -> Row {
    let blank = |s: &str| s.to_string();
    let Some(h) = t.http.as_ref().filter(|_| t.status == TestStatus::Ok) else {
        return Row {
            row,
            test: t.name.clone(),
            gbps: blank("-"),
            requests_per_s: blank("-"),
            client_cpu: blank("-"),
            server_cpu: blank("-"),
            softirq: blank("-"),
            ktls: blank("-"),
            note: t.error.clone().unwrap_or_else(|| "failed".into()),
        };
    };
    let cpu = |c: &crate::proto::http::CpuSplit| {
        format!(
            "{:.0}% ({:.0}u/{:.0}s)",
            c.user_pct + c.system_pct,
            c.user_pct,
            c.system_pct
        )
    };
    let s = h.server.as_ref();
    let requested = h.client.ktls.requested || s.is_some_and(|s| s.ktls.requested);
    let used = |k: &crate::proto::http::KtlsStatus| if k.in_use { "yes" } else { "no" };
    let ktls = if requested {
        format!(
            "client {}, server {}",
            used(&h.client.ktls),
            s.map(|s| used(&s.ktls)).unwrap_or("?")
        )
    } else {
        "-".into()
    };
    let missing = requested
        && !h.client.ktls.in_use
        && !s.is_some_and(|s| s.ktls.in_use)
        && [Some(&h.client.ktls), s.map(|s| &s.ktls)]
            .into_iter()
            .flatten()
            .any(|k| k.note.as_deref() == Some(KTLS_MISSING));
    let note = if missing {
        format!("{KTLS_MISSING}: measured user-space TLS")
    } else {
        h.bound
            .as_ref()
            .map(|b| format!("bound: {b}"))
            .unwrap_or_default()
    };
    Row {
        row,
        test: t.name.clone(),
        gbps: format!("{:.2}", h.goodput_bps / 1e9),
        requests_per_s: format!("{:.1}", h.requests_per_s),
        client_cpu: cpu(&h.client.cpu),
        server_cpu: s.map(|s| cpu(&s.cpu)).unwrap_or_else(|| "-".into()),
        softirq: format!("{:.0}%", h.client.cpu.softirq_pct),
        ktls,
        note,
    }
}

/// The matrix as a terminal table, or `None` when the run has no rows.
pub fn table(results: &RunResults) -> Option<String> {
    let rows = rows(results);
    if rows.is_empty() {
        return None;
    }
    let header = HEADER;
    let cells: Vec<[String; 9]> = rows.into_iter().map(Row::cells).collect();
    let mut width = header.map(|h| h.chars().count());
    for c in &cells {
        for (w, v) in width.iter_mut().zip(c) {
            *w = (*w).max(v.chars().count());
        }
    }
    let line = |v: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in v.iter().zip(width).enumerate() {
            if i + 1 == v.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = String::from(
        "\nHTTP matrix (T1 HTTP, T2 HTTPS, T3 HTTPS+kTLS; CPU in % of the host's CPUs, user/system)\n",
    );
    out.push_str(&line(&header.map(String::from)));
    for c in &cells {
        out.push_str(&line(c));
    }
    Some(out)
}
