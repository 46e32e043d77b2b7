//! `sluice apps`: the built-in applications, one line each, with their settings and the
//! plans they ship.

pub(crate) fn list() -> anyhow::Result<()> {
    for app in sluice_apps::registry() {
        println!("{:<12} {}", app.name, app.about);
        for (key, about) in app.settings {
            println!("{:<12}   --set {key}=...  {about}", "");
        }
        for plan in app.plans {
            println!("{:<12}   --plan {}  {}", "", plan.name, plan.about);
        }
    }
    Ok(())
}
