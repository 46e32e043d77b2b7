//! `sluice apps`: the built-in applications, one line each, with their settings.

pub(crate) fn list() -> anyhow::Result<()> {
    for app in sluice_apps::registry() {
        println!("{:<12} {}", app.name, app.about);
        for (key, about) in app.settings {
            println!("{:<12}   --set {key}=...  {about}", "");
        }
    }
    Ok(())
}
