//! The progress of a running job on standard error ([`RunOptions::progress`]), and the warning
//! when its sources run below the rate asked ([`RunOptions::asked_rate`]): every program's
//! job shows it, `sluice run`'s as any other.
//!
//! On a terminal, a live line (`indicatif`) redrawn every [`REFRESH`]: uptime, the sources'
//! and the sinks' rates, the worst p99 of the sampled latency markers at the sinks, and the
//! largest share of time a thread spent blocked on a full queue. Elsewhere (a log, CI) a
//! plain line every [`LOG_EVERY`], as Flink's and Storm's metric reporters log at an
//! interval: a long run shows it is alive without filling a short run's output (a run under
//! 10 s prints none).
//!
//! When the sources run more than [`SHORTFALL`] below the rate asked (`--rate`) for
//! [`SHORTFALL_FOR`] in a row, a warning says so, once per episode (again if the rate
//! recovered and fell again); the summary then says what was asked and reached.

use std::io::IsTerminal;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::{MetricsHandle, MetricsSnapshot, RunOptions};

/// How often the live line is redrawn and the rate checked.
const REFRESH: Duration = Duration::from_millis(500);
/// How often the plain line is written when standard error is no terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// How far below the rate asked the sources may run (a share of it).
const SHORTFALL: f64 = 0.05;
/// How long they must run that far below before the warning.
const SHORTFALL_FOR: Duration = Duration::from_secs(3);

/// The rate the sources were asked for with `--rate`, in tuples per second. (Not the default
/// rate of generated input: not every application's sources follow it, OMDP's feed handlers
/// run at the feed's rate.)
#[derive(Debug, Clone, Copy)]
pub struct Asked {
    /// Tuples per second.
    pub rate: u64,
}

impl Asked {
    fn named(&self) -> String {
        format!("{} tuples/s (--rate)", with_commas(self.rate))
    }

    /// Whether `rate` is more than [`SHORTFALL`] below what was asked.
    fn missed_by(&self, rate: f64) -> bool {
        rate < self.rate as f64 * (1.0 - SHORTFALL)
    }

    /// The warning of the summary when the sources' average, `reached`, fell short.
    pub fn summary(&self, reached: f64) -> Option<String> {
        self.missed_by(reached).then(|| {
            format!(
                "warning: asked {}, reached {}/s",
                self.named(),
                with_commas(reached.round() as u64)
            )
        })
    }
}

/// The thread drawing the progress; ended by [`Progress::finish`].
pub(crate) struct Progress {
    /// Dropped to end the thread at once (it waits on the other end between refreshes).
    done: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts showing the progress of the job whose metrics `metrics` holds, if `options`
    /// ask for it.
    pub(crate) fn start_if_asked(metrics: &MetricsHandle, options: &RunOptions) -> Option<Self> {
        if !options.progress || !options.metrics {
            return None;
        }
        let asked = options.asked_rate.map(|rate| Asked { rate });
        Some(Self::start(metrics.clone(), asked))
    }

    /// Starts showing the progress of the job whose metrics `metrics` holds.
    fn start(metrics: MetricsHandle, asked: Option<Asked>) -> Self {
        let (done, ended) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("sluice-progress".into())
            .spawn(move || show(&metrics, asked, &ended))
            .ok();
        Self {
            done: Some(done),
            thread,
        }
    }

    /// Stops showing it (the live line is cleared).
    pub(crate) fn finish(mut self) {
        drop(self.done.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Where the progress goes: a live line on a terminal, plain lines elsewhere.
enum Display {
    Live(ProgressBar),
    Log { last: Instant },
}

impl Display {
    fn warn(&self, line: &str) {
        match self {
            Self::Live(bar) => bar.println(line),
            Self::Log { .. } => warn_line(line),
        }
    }
}

fn show(metrics: &MetricsHandle, asked: Option<Asked>, ended: &Receiver<()>) {
    let mut display = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        Display::Live(bar)
    } else {
        Display::Log {
            last: Instant::now(),
        }
    };
    let mut short_since: Option<Instant> = None;
    let mut warned = false;
    while let Err(RecvTimeoutError::Timeout) = ended.recv_timeout(REFRESH) {
        let snapshot = metrics.snapshot();
        if snapshot.pes.is_empty() {
            continue;
        }
        let line = describe(&snapshot);
        match &mut display {
            Display::Live(bar) => {
                bar.set_message(line);
                bar.tick();
            }
            Display::Log { last } => {
                if last.elapsed() >= LOG_EVERY {
                    *last = Instant::now();
                    tracing::info!("progress: {line}");
                }
            }
        }
        let Some(asked) = asked else { continue };
        // Rates need two samples of every PE; until then the sources read as idle.
        let sampled = snapshot.uptime_secs > 1.0;
        let rate = snapshot.source_rate();
        if sampled && asked.missed_by(rate) {
            let since = *short_since.get_or_insert_with(Instant::now);
            if !warned && since.elapsed() >= SHORTFALL_FOR {
                warned = true;
                display.warn(&format!(
                    "warning: the sources run at {}/s, more than {:.0}% below the {} asked, for {:.0} s: \
                     the machine (or the job's slowest operator) cannot keep up",
                    with_commas(rate.round() as u64),
                    SHORTFALL * 100.0,
                    asked.named(),
                    SHORTFALL_FOR.as_secs_f64()
                ));
            }
        } else if sampled {
            short_since = None;
            warned = false;
        }
    }
    if let Display::Live(bar) = display {
        bar.finish_and_clear();
    }
}

/// The progress line: uptime, the sources' and sinks' rates, the sinks' worst p99 latency,
/// the most backpressure a thread met.
fn describe(snapshot: &MetricsSnapshot) -> String {
    let sinks: f64 = snapshot
        .instances()
        .filter(|i| i.sink)
        .map(|i| i.rate_in)
        .sum();
    let p99 = snapshot
        .instances()
        .filter(|i| i.sink)
        .filter_map(|i| i.latency.map(|l| l.p99_us))
        .fold(None, |worst: Option<f64>, p| {
            Some(worst.map_or(p, |w| w.max(p)))
        });
    let blocked = snapshot
        .threads()
        .map(|t| t.blocked_share)
        .fold(0.0, f64::max);
    let mut line = format!(
        "{:.0} s: sources {}/s, sinks {}/s",
        snapshot.uptime_secs,
        with_commas(snapshot.source_rate().round() as u64),
        with_commas(sinks.round() as u64)
    );
    if let Some(p99) = p99 {
        line.push_str(&format!(", p99 latency {}", micros(p99)));
    }
    line.push_str(&format!(", backpressure {:.0}%", blocked * 100.0));
    line
}

/// Logs `line`, a message that says `warning: ...` itself, as a warning event.
pub fn warn_line(line: &str) {
    tracing::warn!("{}", line.strip_prefix("warning: ").unwrap_or(line));
}

/// `n` with its thousands separated by commas: `1,234,567`.
pub fn with_commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A latency in microseconds, in the unit that reads best.
pub fn micros(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.1} us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_more_than_five_percent_short_is_warned_about() {
        let asked = Asked { rate: 200_000 };
        assert_eq!(
            asked.summary(103_000.0).as_deref(),
            Some("warning: asked 200,000 tuples/s (--rate), reached 103,000/s")
        );
        assert_eq!(asked.summary(191_000.0), None);
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(with_commas(0), "0");
        assert_eq!(with_commas(999), "999");
        assert_eq!(with_commas(1000), "1,000");
        assert_eq!(with_commas(1234567), "1,234,567");
    }

    #[test]
    fn latencies_read_in_their_unit() {
        assert_eq!(micros(12.34), "12.3 us");
        assert_eq!(micros(1_500.0), "1.50 ms");
        assert_eq!(micros(2_500_000.0), "2.50 s");
    }
}
