//! `sluice apps`: the built-in applications, one line each, with their settings and the
//! plans they ship.

use std::io::Write;

pub(crate) fn list() -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for app in sluice_apps::registry() {
        writeln!(out, "{:<12} {}", app.name, app.about)?;
        for (key, about) in app.settings {
            writeln!(out, "{:<12}   --set {key}=...  {about}", "")?;
        }
        for plan in app.plans {
            writeln!(out, "{:<12}   --plan {}  {}", "", plan.name, plan.about)?;
        }
    }
    Ok(())
}
