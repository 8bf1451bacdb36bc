//! TEMPORARY placeholder.
pub fn run(
    _p: &crate::config::PlanConfig,
    _o: &crate::config::RunOpts,
    _r: &mut crate::run::Run,
) -> anyhow::Result<()> {
    anyhow::bail!("plans are not wired yet")
}
