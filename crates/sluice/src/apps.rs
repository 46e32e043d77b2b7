//! `sluice apps`: the built-in applications, one line each, with their settings and the
//! plans they ship; and the same for one application after the usual help of
//! `sluice run NAME --help`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write;

use sluice_apps::AppSpec;

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

/// The application whose settings `sluice run NAME --help` (or `-h`) asks for: the first
/// argument after `run` that names a built-in application, when help is asked for.
pub(crate) fn help_asked_for(args: &[OsString]) -> Option<&'static AppSpec> {
    let rest = match args {
        [_, run, rest @ ..] if run == "run" => rest,
        _ => return None,
    };
    if !rest.iter().any(|a| a == "--help" || a == "-h") {
        return None;
    }
    rest.iter()
        .filter_map(|a| a.to_str())
        .find_map(|name| sluice_apps::find(name).ok())
}

/// What `sluice run NAME --help` prints after the usual help: the application, its `--set`
/// settings and the plans it ships.
pub(crate) fn help(app: &AppSpec) -> String {
    let mut text = format!(
        "{}: {}\n\nSettings (--set KEY=VALUE):\n",
        app.name, app.about
    );
    let width = app.settings.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, about) in app.settings {
        let _ = writeln!(text, "  {key:<width$}  {about}");
    }
    if app.settings.is_empty() {
        text.push_str("  (none)\n");
    }
    text.push_str(
        "\nPlans (--plan NAME): auto (the default: `sluice plan APP` says what it chooses), \
         fused, threaded, processes, a plan file",
    );
    if app.plans.is_empty() {
        text.push('\n');
    } else {
        text.push_str(", or one it ships:\n");
        let width = app.plans.iter().map(|p| p.name.len()).max().unwrap_or(0);
        for plan in app.plans {
            let _ = writeln!(text, "  {:<width$}  {}", plan.name, plan.about);
        }
    }
    text
}
