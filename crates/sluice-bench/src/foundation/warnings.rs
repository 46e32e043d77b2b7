//! Figures that cannot be true as printed, found and said beside them. On a loaded machine a
//! run can show Sluice faster than the hardware floor it was measured against (the floor and
//! Sluice ran under different load), a rate far below the one asked, or repeats that disagree
//! with each other; every benchmark result carries a list of [`Warning`]s under the field
//! `warnings` (JSON), printed as `warning:` lines under its table and gathered by the suite's
//! report. The checks are pure functions of the figures, so each rule is tested on figures
//! built to break it.
//!
//! The rules and their limits:
//! - **below-floor**: a figure that cannot be below another (a latency below the hardware's
//!   least between the same cores, the two-line hand-off below the one-line ping-pong, a
//!   tuned program slower than the naive one) is below it by more than [`FLOOR_TOLERANCE`].
//! - **rate-not-reached**: a paced run reached less than [`RATE_REACHED`] of the rate asked.
//! - **wide-spread**: repeats of one figure spread (highest minus lowest) by more than
//!   [`SPREAD_LIMIT`] of their median.

use serde::{Deserialize, Serialize};

use crate::foundation::stats::{median, si};

/// A figure below its floor by less than this share of the floor is measurement noise; below
/// by more, it is doubted.
pub(crate) const FLOOR_TOLERANCE: f64 = 0.05;
/// A paced run that reached less than this share of the rate asked is doubted.
pub(crate) const RATE_REACHED: f64 = 0.9;
/// Repeats whose spread (highest minus lowest) exceeds this share of their median are doubted.
pub(crate) const SPREAD_LIMIT: f64 = 0.5;

/// Which rule a figure broke; its JSON name is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// A figure below what it cannot be below.
    BelowFloor,
    /// A paced run short of the rate asked.
    RateNotReached,
    /// Repeats that disagree.
    WideSpread,
}

/// One doubt about a result: the rule broken and the figures that broke it, in a sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// The rule.
    pub check: Check,
    /// What was seen, with the figures.
    pub detail: String,
}

/// A figure with what it is and its unit, as a check names it: `("sluice p50", 436.0, "ns")`.
pub(crate) type Named<'a> = (&'a str, f64, &'a str);

/// Checks that `figure` is not below `floor` (both in one unit, where lower means faster for a
/// latency and slower for a rate: the caller orders them so that the floor is the one that
/// cannot be beaten, or cannot be lost to).
pub(crate) fn below_floor(figure: Named<'_>, floor: Named<'_>, why: &str) -> Option<Warning> {
    let ((what, value, unit), (floor_what, least, _)) = (figure, floor);
    let finite = value.is_finite() && least.is_finite() && least > 0.0;
    (finite && value < least * (1.0 - FLOOR_TOLERANCE)).then(|| Warning {
        check: Check::BelowFloor,
        detail: format!(
            "{what} {} {unit} is below {floor_what} {} {unit} (ratio {:.3}), which {why}: the two were measured under different load; measure again on a quieter machine",
            figure_text(value),
            figure_text(least),
            value / least
        ),
    })
}

/// Checks that a paced run reached the rate asked: `reached` and `asked` in `unit`s per
/// second.
pub(crate) fn rate_not_reached(what: &str, reached: f64, asked: f64) -> Option<Warning> {
    (asked > 0.0 && reached < asked * RATE_REACHED).then(|| Warning {
        check: Check::RateNotReached,
        detail: format!(
            "{what} reached {}/s of the {}/s asked ({:.0}%): the figures are at the rate reached, not the one asked",
            si(reached),
            si(asked),
            100.0 * reached / asked
        ),
    })
}

/// Checks that the repeats `values` of one figure agree; fewer than two cannot disagree.
pub(crate) fn wide_spread(what: &str, values: &[f64], unit: &str) -> Option<Warning> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() < 2 {
        return None;
    }
    let lowest = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let middle = median(&finite);
    let spread = (highest - lowest) / middle;
    (middle > 0.0 && spread > SPREAD_LIMIT).then(|| Warning {
        check: Check::WideSpread,
        detail: format!(
            "{what} ranged from {} to {} {unit} over {} runs, {:.0}% of the median: the median is uncertain; measure again on a quieter machine or with more --repeat",
            figure_text(lowest),
            figure_text(highest),
            finite.len(),
            100.0 * spread
        ),
    })
}

/// A figure in a sentence: with an SI suffix from a thousand up, else to one decimal.
fn figure_text(value: f64) -> String {
    if value.abs() >= 1e3 {
        si(value)
    } else {
        format!("{value:.1}")
    }
}

/// The warnings as lines under a table: `warning: ...` each.
pub(crate) fn lines(warnings: &[Warning]) -> String {
    warnings
        .iter()
        .map(|w| format!("warning: {}\n", w.detail))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_below_its_hardware_floor_is_doubted_and_one_above_is_not() {
        // The figures: Sluice's ping-pong p50 436 ns against a floor of 2,467 ns.
        let w = below_floor(
            ("sluice p50", 436.0, "ns"),
            ("the hardware's p50", 2467.0, "ns"),
            "nothing between the two cores can beat",
        )
        .unwrap();
        assert_eq!(w.check, Check::BelowFloor);
        assert!(
            w.detail.starts_with(
                "sluice p50 436.0 ns is below the hardware's p50 2.47 k ns (ratio 0.177)"
            ),
            "{}",
            w.detail
        );
        let fine = below_floor(("a", 2467.0, "ns"), ("b", 436.0, "ns"), "");
        assert_eq!(fine, None);
        // Within the tolerance: noise, not a doubt.
        assert_eq!(below_floor(("a", 97.0, "ns"), ("b", 100.0, "ns"), ""), None);
        // Nothing measured: nothing to doubt.
        assert_eq!(below_floor(("a", 1.0, "ns"), ("b", 0.0, "ns"), ""), None);
        assert_eq!(
            below_floor(("a", f64::NAN, "ns"), ("b", 9.0, "ns"), ""),
            None
        );
    }

    #[test]
    fn a_handoff_below_the_ping_pong_and_a_naive_program_above_the_tuned_one_are_doubted() {
        let handoff = below_floor(
            ("the two-line hand-off", 514.0, "ns"),
            ("the one-line ping-pong", 3389.0, "ns"),
            "",
        );
        assert!(handoff.is_some());
        let tuned = below_floor(
            ("the tuned yardstick", 11e6, "words/s"),
            ("the naive yardstick", 14e6, "words/s"),
            "",
        )
        .unwrap();
        assert!(tuned.detail.contains("11.00 M words/s"), "{}", tuned.detail);
    }

    #[test]
    fn a_rate_short_of_the_one_asked_is_doubted() {
        let w = rate_not_reached("the sender", 27_000.0, 100_000.0).unwrap();
        assert_eq!(w.check, Check::RateNotReached);
        assert!(
            w.detail
                .starts_with("the sender reached 27.00 k/s of the 100.00 k/s asked (27%)"),
            "{}",
            w.detail
        );
        assert_eq!(rate_not_reached("s", 95_000.0, 100_000.0), None);
        assert_eq!(rate_not_reached("s", 0.0, 0.0), None);
    }

    #[test]
    fn repeats_that_disagree_are_doubted() {
        let w = wide_spread("sluice p50", &[400.0, 450.0, 1300.0], "ns").unwrap();
        assert_eq!(w.check, Check::WideSpread);
        assert!(
            w.detail
                .starts_with("sluice p50 ranged from 400.0 to 1.30 k ns over 3 runs, 200%"),
            "{}",
            w.detail
        );
        assert_eq!(wide_spread("a", &[100.0, 120.0, 110.0], "ns"), None);
        assert_eq!(wide_spread("a", &[100.0], "ns"), None);
        assert_eq!(wide_spread("a", &[], "ns"), None);
    }

    #[test]
    fn warnings_serialize_under_stable_names() {
        let w = rate_not_reached("s", 1.0, 100.0).unwrap();
        let json = serde_json::to_value(&w).unwrap();
        assert_eq!(json["check"], "rate-not-reached");
        assert!(json["detail"].is_string());
        assert!(lines(&[w]).starts_with("warning: s reached"));
    }
}
