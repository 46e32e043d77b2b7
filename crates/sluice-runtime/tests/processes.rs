//! The control plane end to end: jobs run as one process per PE, the processes being this test
//! binary itself. The binary has its own `main` (no test harness): like any Sluice program it
//! builds its graph first, and a process started as a PE enters [`serve_pe`] there, explicitly,
//! before anything else; the launching process runs the cases. The graph a PE builds is named
//! by its first argument, which the launcher gives every PE ([`RunOptions::pe_args`]).
//!
//! A job of three PEs delivers every tuple and reports every PE's counters; a PE killed by
//! SIGKILL fails the job with an error naming that PE and the signal; a job suspended with more
//! state than a control message carries (64 MiB) resumes with all of it, each tuple once, on
//! one host and on two (loopback addresses, the launcher and its PEs joined by TCP).

use std::ffi::OsString;
use std::time::Duration;

use sluice_graph::{
    expect_tuple, Graph, GraphBuilder, Operator, OperatorError, OperatorReport, Output, Ports,
    Produced, Snapshot, Source,
};
use sluice_plan::{plan, HostsFile, PlanOptions, PlanRequest};
use sluice_runtime::{
    is_pe_process, resume_with, run, serve_pe, start, RunError, RunOptions, StopHandle,
};
use sluice_types::TupleRef;

/// The longest the cases may take together before this binary calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(120);
/// How many numbers the finite job sends.
const NUMBERS: u64 = 100_000;
/// The tuple on which the doomed PE kills itself.
const DOOMED_AT: u64 = 1_000;

/// Bytes of the state the ballast keeps: past the 64 MiB a control message carries.
const BALLAST: usize = 80 << 20;

/// Emits `0..end` (for ever, if `end` is `None`), 64 numbers a call, `pause` after each;
/// its position is its state.
struct Numbers {
    next: u64,
    end: Option<u64>,
    pause: Duration,
}

impl Source for Numbers {
    fn resumable(&self) -> bool {
        true
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&self.next)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.next = snapshot.decode_whole()?;
        Ok(())
    }

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
        std::thread::sleep(self.pause);
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

/// Passes numbers on and keeps [`BALLAST`] bytes of state, which it checks when it resumes
/// with them (its counter `restored`: the bytes it took back).
struct Ballast {
    restored: u64,
}

/// The ballast's byte `i`: no two neighbouring MiB alike, so a part misplaced shows.
fn ballast_byte(i: usize) -> u8 {
    (i % 251) as u8 ^ (i >> 20) as u8
}

impl Operator for Ballast {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        out.emit(0, *expect_tuple::<u64>(port, tuple)?)
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(Snapshot {
            operator: (0..BALLAST).map(ballast_byte).collect(),
            ..Snapshot::default()
        })
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        let whole = snapshot.operator.len() == BALLAST
            && snapshot
                .operator
                .iter()
                .enumerate()
                .all(|(i, b)| *b == ballast_byte(i));
        if !whole {
            return Err(OperatorError::Failed(format!(
                "the ballast came back damaged ({} bytes)",
                snapshot.operator.len()
            )));
        }
        self.restored = BALLAST as u64;
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        report.counters.insert("restored".into(), self.restored);
        Ok(report)
    }
}

/// The graph of `case`: `numbers -> double -> SINK`, the sink named `total` in the finite
/// job, `doomed` in the one whose sink kills itself; in the `large` one, the doubling is a
/// ballast (numbers pass as they are) that keeps more state than a control message carries.
fn graph(case: &str) -> Graph {
    let (end, sink, die_at) = match case {
        "finite" | "large" | "large-hosts" => (Some(NUMBERS), "total", None),
        "killed" => (None, "doomed", Some(DOOMED_AT)),
        other => panic!("no case {other}"),
    };
    let mut g = GraphBuilder::new(case);
    // The large job's numbers take some 2 s, so that it is suspended before they end.
    let large = case.starts_with("large");
    let pause = Duration::from_millis(if large { 1 } else { 0 });
    let source = g.source("numbers", Ports::new().output::<u64>(), move |_| Numbers {
        next: 0,
        end,
        pause,
    });
    let ports = Ports::new().input::<u64>().output::<u64>();
    let double = if large {
        g.operator("double", ports, |_| Ballast { restored: 0 })
    } else {
        g.operator("double", ports, |_| Double)
    };
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
        suspendable: case.starts_with("large"),
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

/// A job whose ballast PE holds 80 MiB of state, suspended mid-run and resumed on the same
/// plan: the state goes between the processes in files, as a restart's checkpoint does (it
/// once went inside the control messages, which refused it past 64 MiB), and comes back
/// whole; every number reaches the sink once.
fn a_job_suspended_with_more_state_than_a_message_carries_resumes() {
    suspend_and_resume("large", PlanOptions::default());
}

/// The same on two hosts, at two loopback addresses: the launcher reaches its PEs over TCP
/// and shares no directory with them, so the state goes to the launcher and back in frames
/// of the control stream (it was refused past the 64 MiB a message carries).
fn a_job_suspended_on_two_hosts_with_more_state_than_a_message_carries_resumes() {
    let hosts: String = (1..=2)
        .map(|i| format!("[[host]]\nname = \"h{i}\"\naddress = \"127.0.0.{i}\"\ncores = 2\n"))
        .collect();
    let options = PlanOptions {
        hosts: Some(HostsFile::parse(&hosts).unwrap()),
        ..PlanOptions::default()
    };
    suspend_and_resume("large-hosts", options);
}

/// Runs `case` under `plan_options`' processes plan, suspends it mid-run and resumes it on
/// the same plan: the ballast comes back whole, every number reaches the sink once.
fn suspend_and_resume(case: &str, plan_options: PlanOptions) {
    let graph = graph(case);
    let p = plan(&graph, &PlanRequest::Processes, &plan_options).unwrap();
    assert_eq!(p.launcher.is_some(), plan_options.hosts.is_some());
    let options = options(case);
    let job = start(&graph, &p, &options).unwrap();
    job.stop_handle().suspend();
    let mut report = job.wait().unwrap();
    let state = report.state().expect("a suspended job leaves its state");
    assert!(state.bytes() > 64 << 20, "{} bytes", state.bytes());
    let resumed = resume_with(&graph, &p, &options, &StopHandle::new(), &state).unwrap();
    let after = resumed.wait().unwrap();
    assert_eq!(
        after.operator_report("double").counters["restored"],
        BALLAST as u64
    );
    report.absorb(after);
    assert_eq!(report.tuples_out("numbers"), NUMBERS);
    assert_eq!(report.tuples_in("total"), NUMBERS);
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
    let cases: [(&str, fn()); 4] = [
        (
            "a_job_of_three_processes_delivers_every_tuple",
            a_job_of_three_processes_delivers_every_tuple,
        ),
        (
            "a_killed_pe_fails_the_job_naming_it",
            a_killed_pe_fails_the_job_naming_it,
        ),
        (
            "a_job_suspended_with_more_state_than_a_message_carries_resumes",
            a_job_suspended_with_more_state_than_a_message_carries_resumes,
        ),
        (
            "a_job_suspended_on_two_hosts_with_more_state_than_a_message_carries_resumes",
            a_job_suspended_on_two_hosts_with_more_state_than_a_message_carries_resumes,
        ),
    ];
    for (name, case) in cases {
        eprintln!("test {name} ...");
        case();
        eprintln!("test {name} ... ok");
    }
}
