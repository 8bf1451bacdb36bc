//! Exports for other tools: CSV for spreadsheets (`csv`) and the Prometheus
//! text exposition format (`prometheus`). Both read the runs as loaded and
//! compute rates through `figures`, as the HTML report does.

mod csv;
mod prometheus;

pub use csv::{csv, csv_field};
pub use prometheus::prometheus;
