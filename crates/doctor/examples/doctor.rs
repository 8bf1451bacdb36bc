use clap::Parser;
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    d: linerate_doctor::DoctorArgs,
}
fn main() {
    let c = Cli::parse();
    std::process::exit(linerate_doctor::run_cli(&c.d, &mut std::io::stdout()));
}
