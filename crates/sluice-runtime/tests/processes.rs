//! The control plane end to end: jobs run as one process per PE, the processes being this test
//! binary itself. The binary has its own `main` (no test harness): like any Sluice program it
//! builds its graph first, and a process started as a PE enters [`serve_pe`] there, explicitly,
//! before anything else; the launching process runs the cases. The graph a PE builds is named
//! by its first argument, which the launcher gives every PE ([`RunOptions::pe_args`]).
//!
//! A job of three PEs delivers every tuple and reports every PE's counters; a PE killed by
//! SIGKILL fails the job with an error naming that PE and the signal.

use std::ffi::OsString;
use std::time::Duration;

use sluice_graph::{
    expect_tuple, Graph, GraphBuilder, Operator, OperatorError, OperatorReport, Output, Ports,
    Produced, Source,
};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{is_pe_process, run, serve_pe, RunError, RunOptions};
use sluice_types::TupleRef;

/// The longest the cases may take together before this binary calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(120);
/// How many numbers the finite job sends.
const NUMBERS: u64 = 100_000;
/// The tuple on which the doomed PE kills itself.
const DOOMED_AT: u64 = 1_000;

/// Emits `0..end` (for ever, if `end` is `None`), 64 numbers a call.
struct Numbers {
    next: u64,
    end: Option<u64>,
}

impl Source for Numbers {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let upto = self
            .end
            .map_or(self.next + 64, |end| end.min(self.next + 64));
        if self.next == upto {
            return Ok(Produced::Exhausted);
        }
        let from = self.next;
        for n in from..upto {
            out.emit(0, n)?;
        }
        self.next = upto;
        Ok(Produced::Emitted((upto - from) as usize))
    }
}

/// Doubles each number.
struct Double;

impl Operator for Double {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        out.emit(0, 2 * expect_tuple::<u64>(port, tuple)?)
    }
}

/// Sums what it receives and reports the count and the sum; with `die_at`, kills its own
/// process by SIGKILL on that tuple (a PE that crashes without a word).
struct Total {
    count: u64,
    sum: u64,
    die_at: Option<u64>,
}

impl Operator for Total {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.sum += expect_tuple::<u64>(port, tuple)?;
        self.count += 1;
        if self.die_at == Some(self.count) {
            let me = rustix::process::getpid();
            rustix::process::kill_process(me, rustix::process::Signal::KILL)
                .expect("a process may signal itself");
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        report.counters.insert("count".into(), self.count);
        report.counters.insert("sum".into(), self.sum);
        Ok(report)
    }
}

/// The graph of `case`: `numbers -> double -> SINK`, the sink named `total` in the finite
/// job, `doomed` in the one whose sink kills itself.
fn graph(case: &str) -> Graph {
    let (end, sink, die_at) = match case {
        "finite" => (Some(NUMBERS), "total", None),
        "killed" => (None, "doomed", Some(DOOMED_AT)),
        other => panic!("no case {other}"),
    };
    let mut g = GraphBuilder::new(case);
    let source = g.source("numbers", Ports::new().output::<u64>(), move |_| Numbers {
        next: 0,
        end,
    });
    let double = g.operator(
        "double",
        Ports::new().input::<u64>().output::<u64>(),
        |_| Double,
    );
    let total = g.operator(sink, Ports::new().input::<u64>(), move |_| Total {
        count: 0,
        sum: 0,
        die_at,
    });
    g.connect(source.out(0), double.input(0)).unwrap();
    g.connect(double.out(0), total.input(0)).unwrap();
    g.build().unwrap()
}

/// Options whose PEs rebuild the graph of `case`.
fn options(case: &str) -> RunOptions {
    let args: &'static [OsString] = Box::leak(Box::new([OsString::from(case)]));
    RunOptions {
        pe_args: Some(args),
        ..RunOptions::default()
    }
}

/// Runs `case` with one process per operator.
fn run_as_processes(case: &str) -> Result<sluice_runtime::JobReport, RunError> {
    let graph = graph(case);
    let p = plan(&graph, &PlanRequest::Processes, &PlanOptions::default()).unwrap();
    assert_eq!(p.pes.len(), 3, "one PE per operator");
    run(&graph, &p, &options(case))
}

fn a_job_of_three_processes_delivers_every_tuple() {
    let report = run_as_processes("finite").unwrap();
    let total = report.operator_report("total");
    assert_eq!(total.counters["count"], NUMBERS);
    assert_eq!(total.counters["sum"], NUMBERS * (NUMBERS - 1));
    assert_eq!(report.tuples_out("numbers"), NUMBERS);
    assert_eq!(report.tuples_in("double"), NUMBERS);
}

fn a_killed_pe_fails_the_job_naming_it() {
    let error = run_as_processes("killed").unwrap_err().to_string();
    assert!(
        error.starts_with("PE 'doomed' (operators: doomed) was killed by signal 9 (SIGKILL)"),
        "{error}"
    );
}

fn main() {
    if is_pe_process() {
        // The PE entry: this process is one PE of a job a case below started.
        let case = std::env::args()
            .nth(1)
            .expect("the launcher names the case");
        serve_pe(&graph(&case), &options(&case));
    }
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        eprintln!("the control plane's tests hung for {WATCHDOG:?}");
        std::process::exit(2);
    });
    let cases: [(&str, fn()); 2] = [
        (
            "a_job_of_three_processes_delivers_every_tuple",
            a_job_of_three_processes_delivers_every_tuple,
        ),
        (
            "a_killed_pe_fails_the_job_naming_it",
            a_killed_pe_fails_the_job_naming_it,
        ),
    ];
    for (name, case) in cases {
        eprintln!("test {name} ...");
        case();
        eprintln!("test {name} ... ok");
    }
}
