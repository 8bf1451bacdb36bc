//! Runs `doctor` on its own, without the linerate binary:
//! `cargo run -p linerate-doctor --example doctor -- --root tests/fixtures/two-ccd --cpus 2`.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    doctor: linerate_doctor::DoctorArgs,
}

fn main() {
    let cli = Cli::parse();
    let code = linerate_doctor::run_cli(&cli.doctor, &mut std::io::stdout().lock());
    std::process::exit(code);
}
