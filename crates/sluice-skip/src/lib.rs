//! The one way a Sluice test gives up because a real part it needs is missing here (a tool
//! such as `mpirun`, `tmux` or Chromium, root, a mount or network namespace, a Kafka broker).
//!
//! On a developer's machine the test says so on stderr (`skipped: WHY`) and passes; under
//! `CI=true` (set by CI services and by `.ci/run`'s callers) it fails instead, naming what was
//! missing, because CI installs every part and a skipped test there would pass having checked
//! nothing. Tests call [`skip`] and then return:
//!
//! ```
//! fn have_tmux() -> bool {
//!     let version = std::process::Command::new("tmux").arg("-V").output();
//!     version.is_ok_and(|o| o.status.success())
//! }
//!
//! fn top_under_tmux() {
//!     if !have_tmux() {
//!         sluice_skip::skip("tmux is not installed");
//!         return;
//!     }
//!     // ... the test ...
//! }
//! ```

use std::fmt::Display;

/// The environment variable that says the tests run in CI, where nothing may be skipped; its
/// value there is `true`.
pub const CI_VARIABLE: &str = "CI";

/// Whether the tests run in CI: `CI=true`.
pub fn in_ci() -> bool {
    std::env::var(CI_VARIABLE).as_deref() == Ok("true")
}

/// Says on stderr that the calling test cannot run here because of `why` (it then returns
/// without checking anything); under `CI=true` fails the test with `why` instead.
#[track_caller]
pub fn skip(why: impl Display) {
    skip_where(in_ci(), why);
}

/// [`skip`] with the answer of [`in_ci`] given.
#[track_caller]
fn skip_where(ci: bool, why: impl Display) {
    assert!(
        !ci,
        "{CI_VARIABLE}=true, where every part a test needs must be present, and this test cannot \
         run: {why}"
    );
    eprintln!("skipped: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(
        expected = "CI=true, where every part a test needs must be present, and this \
                               test cannot run: no mpirun"
    )]
    fn a_skip_in_ci_fails_naming_what_is_missing() {
        skip_where(true, "no mpirun");
    }

    #[test]
    fn a_skip_elsewhere_passes() {
        skip_where(false, "no mpirun");
    }

    #[test]
    fn ci_is_read_from_the_environment_in_a_child_process() {
        // The variable is set in a child (this test binary, filtered to one test that panics
        // when `in_ci` is true), never in this process, where other tests read it.
        let run = |ci: Option<&str>| {
            let mut command = std::process::Command::new(std::env::current_exe().unwrap());
            command.args(["--exact", "tests::child_skips", "--include-ignored"]);
            command
                .env_remove(CI_VARIABLE)
                .env("SLUICE_SKIP_CHILD", "1");
            if let Some(ci) = ci {
                command.env(CI_VARIABLE, ci);
            }
            let o = command.output().unwrap();
            (
                o.status.success(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            )
        };
        let (passed, out) = run(Some("true"));
        assert!(!passed, "CI=true must fail a skip: {out}");
        for ci in [None, Some("false"), Some("1")] {
            let (passed, out) = run(ci);
            assert!(passed, "CI={ci:?} must let a skip pass: {out}");
        }
    }

    /// Run only as the child of the test above.
    #[test]
    #[ignore = "run by ci_is_read_from_the_environment_in_a_child_process"]
    fn child_skips() {
        assert!(std::env::var_os("SLUICE_SKIP_CHILD").is_some());
        skip("the child's reason");
    }
}
