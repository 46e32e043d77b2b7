//! Embeds the commit being benchmarked (`git rev-parse --short HEAD`) as `SLUICE_BENCH_COMMIT`,
//! or `unknown` when git or the repository is not available (e.g. a source tarball).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SLUICE_BENCH_COMMIT={commit}");

    // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it points to (a commit) and
    // packed-refs (a gc). Only files that exist are watched: cargo reruns the script on every
    // build for a watched path that is missing. git prints these paths relative to the package
    // directory, which is both this script's working directory and what cargo resolves
    // relative paths against.
    println!("cargo:rerun-if-changed=build.rs");
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
