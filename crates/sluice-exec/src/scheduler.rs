//! Threads of a plan sharing a core: a polling worker runs several of them in turn.
//!
//! A plan may have more threads than the machine has cores (the `threaded` plan gives every
//! operator instance its own). One OS thread per plan thread then makes the kernel share the
//! cores: a thread that finds its queue full or empty spins or parks, and the one it waits for
//! runs only when the kernel next gives it a slice (tens of microseconds late, or a whole
//! scheduler tick). Instead, where a process has more plan threads than polling workers
//! ([`crate::RunOptions::workers`], `sluice run --workers N`), each worker, one OS thread, runs
//! several plan threads as [`Task`]s (Timely's workers and Flink's mailbox are the models).
//! A worker turns through its tasks in order (the plan lists upstream before downstream, so a
//! task that just filled its queue is followed by its consumer when they share the worker),
//! and each task it steps takes one [`Task::step`]: one round of its work loop, which is
//! bounded (each source's `produce` once, each receiver polled for at most `poll_batch`
//! messages, the due timers), and never waits.
//!
//! # Only tasks with work are stepped
//!
//! Most of a worker's tasks have nothing to do most of the time (VWAP's 332 operators on two
//! workers: a round of an idle task polls and flushes empty ports for nothing). So a turn
//! steps only the tasks that say they are [`Task::ready`]: one with a source, a processing
//! timer, messages held for a full queue, or a receiver whose queue has something published
//! (or whose sender left). That look costs a load or two a receiver (the queue's published
//! position), where a step costs a whole round. Every [`FULL_TURN_EVERY`]-th turn, and every
//! turn after one that did no work, is *full*: it steps every task not done, ready or not, for
//! what readiness does not see (a stop, a checkpoint's completion, the live metrics asked,
//! an abort), so these wait at most that many turns, and an idle worker steps everything as
//! it did before it idles.
//!
//! No input is missed and no task starves. Readiness is not a flag that someone sets and
//! the worker clears, so there is no wake-up to lose between "found empty" and "marked idle":
//! it is read from the queue itself each turn. A producer publishes with a Release store of
//! the queue's position; the ready look is an Acquire load of it, so a look that comes after
//! the publish (in the queue position's order) sees it and the task is stepped in that turn,
//! and a look that came before sees an earlier position, and the next turn's look sees the
//! new one. And whatever readiness misses, the next full turn steps, at most
//! [`FULL_TURN_EVERY`] turns later: a task that is not done is stepped at least once in every
//! `FULL_TURN_EVERY` consecutive turns, so the argument below (which needs every task with
//! room or input stepped again and again) holds as before. The model test checks that a task
//! that said it was not ready never finds work in its step.
//!
//! # A send never waits
//!
//! The senders of a task's edges to other threads hold what finds their queue full
//! ([`ErasedSender::hold_when_full`](sluice_transport::ErasedSender::hold_when_full)), in order
//! behind what they already hold, instead of spinning in place deep in an operator's call. The
//! round goes on to its end (the operator's call returns), and the task says it is
//! [`Step::Blocked`]. A blocked task's next step first flushes what its senders hold; while
//! some is still held it does nothing else (no source produces, no receiver is polled), so
//! what a sender holds is at most what one round emitted, and backpressure reaches upstream
//! as before: a task that is not polled leaves its own input queues full. Order per edge is
//! kept because a sender that holds anything holds every later offer behind it.
//!
//! # No deadlock
//!
//! A plan's instances form a DAG (the graph refuses cycles), so its tasks do: a task sends
//! only to tasks downstream of it. Suppose every worker turns forever and some task never
//! finishes. Among the tasks that never finish, take one, `t`, with no unfinished task
//! downstream on a queue it holds for. `t` is blocked only on a sender whose queue's consumer
//! `c` is downstream of `t`. `c` is stepped on every turn of its worker, whichever worker that
//! is (this one or another), because a worker's turn steps every task it has that is not done
//! and no step waits: so `c` polls that queue every round in which it is not blocked itself,
//! and it is blocked only on queues further downstream. Following consumers downstream ends,
//! in a DAG, at a task that holds nothing (a sink holds nothing), which frees room, so every
//! queue on the path drains in turn and `t`'s sender delivers what it holds. The same argument
//! covers what the blocking design could not: two tasks on one worker joined by a full queue
//! (the producer returns to the worker, which steps the consumer in the same turn: a full queue
//! makes its consumer ready), and a
//! cycle of waits through workers (a task on worker A waiting on one on B waiting on another
//! on A): no step waits, so no worker is ever held by one task while another of its tasks
//! could make room. A task is never skipped for long: every full turn steps every task that
//! is not done, and a task with input waiting is stepped on every turn (no starvation). The
//! model test below checks all of this over
//! random graphs, queue capacities, placements on workers and interleavings of the workers.
//!
//! What still waits: an operator's own blocking call (a sink writing to a slow socket, a
//! source sleeping to pace itself) holds its whole worker, as it held its thread before.

use std::time::Duration;

use sluice_sync::IdleStrategy;

use crate::exec::{Env, RoundDone, Running};

/// What one step of a task did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// It did work.
    Progress,
    /// It had nothing to do.
    Idle,
    /// A sender of it holds what its queue had no room for: it does nothing else until that
    /// is delivered.
    Blocked,
    /// It finished, and everything it sent is delivered.
    Done,
    /// The job aborts.
    Aborted,
}

/// A worker steps every task, ready or not, at least once in this many turns.
pub(crate) const FULL_TURN_EVERY: u32 = 64;

/// Something a worker runs a step at a time.
pub(crate) trait Task {
    /// One bounded piece of work, which never waits.
    fn step(&mut self) -> Step;
    /// Whether a step may find work now, by a cheap look: false only if a step would find
    /// nothing but what a full turn is there for (the module doc's "Only tasks with work").
    fn ready(&mut self) -> bool;
    /// Sleeps until what the task waits for may have come (data in, or room in a queue it
    /// holds messages for), at most `timeout`; false if it has nothing to park on.
    fn park(&mut self, timeout: Duration) -> bool;
}

/// How a worker's tasks ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Every task is done.
    Done,
    /// The job aborts.
    Aborted,
}

/// One worker's tasks, stepped in turn.
pub(crate) struct Rotation<T> {
    tasks: Vec<T>,
    done: Vec<bool>,
    /// The task a `park` wait sleeps on next.
    park_next: usize,
    /// Turns since the last full one.
    since_full: u32,
    /// The last turn did no work, so the next is full.
    full_next: bool,
}

impl<T: Task> Rotation<T> {
    pub(crate) fn new(tasks: Vec<T>) -> Self {
        Self {
            done: vec![false; tasks.len()],
            tasks,
            park_next: 0,
            since_full: 0,
            full_next: true,
        }
    }

    /// One turn: every task not done that is ready takes one step, in order; on a full turn
    /// every task not done does. `Ok(progress)` while some task is not done, with whether any
    /// did work.
    pub(crate) fn turn(&mut self) -> Result<bool, Ended> {
        let full = self.next_is_full();
        self.since_full = if full { 0 } else { self.since_full + 1 };
        let mut progress = false;
        let mut left = false;
        for (task, done) in self.tasks.iter_mut().zip(&mut self.done) {
            if *done {
                continue;
            }
            if !full && !task.ready() {
                left = true;
                continue;
            }
            match task.step() {
                Step::Progress => (progress, left) = (true, true),
                Step::Idle | Step::Blocked => left = true,
                Step::Done => (*done, progress) = (true, true),
                Step::Aborted => return Err(Ended::Aborted),
            }
        }
        self.full_next = !progress;
        if left {
            Ok(progress)
        } else {
            Err(Ended::Done)
        }
    }

    /// Whether the next turn steps every task not done.
    fn next_is_full(&self) -> bool {
        self.full_next || self.since_full + 1 >= FULL_TURN_EVERY
    }

    /// Turns until every task is done or the job aborts, idling by `idle` after a turn that
    /// did no work (parking on the tasks in turn).
    pub(crate) fn run(&mut self, idle: IdleStrategy) -> Ended {
        let mut idle = idle.waiter();
        loop {
            match self.turn() {
                Ok(progress) => {
                    idle.after_or_park(usize::from(progress), |timeout| self.park(timeout))
                }
                Err(ended) => return ended,
            }
        }
    }

    /// Parks on the next task not done, at most `timeout`.
    fn park(&mut self, timeout: Duration) -> bool {
        let count = self.tasks.len();
        for k in 0..count {
            let at = (self.park_next + k) % count;
            if !self.done[at] {
                self.park_next = at + 1;
                return self.tasks[at].park(timeout);
            }
        }
        false
    }

    /// The tasks, in the order given.
    pub(crate) fn into_tasks(self) -> Vec<T> {
        self.tasks
    }
}

/// A plan thread run as a task of a worker: its started instances and the job's view of it.
pub(crate) struct ThreadTask<'a> {
    pub(crate) running: Running,
    pub(crate) env: &'a Env<'a>,
    /// Its senders held messages at the end of its last step.
    held: bool,
}

impl<'a> ThreadTask<'a> {
    /// The task running `running`, whose senders it makes hold when full.
    pub(crate) fn new(mut running: Running, env: &'a Env<'a>) -> Self {
        running.hold_when_full();
        Self {
            running,
            env,
            held: false,
        }
    }
}

impl Task for ThreadTask<'_> {
    fn step(&mut self) -> Step {
        if self.held {
            self.held = self.running.flush_held();
            if self.held {
                // Backpressure is no stall of this worker's.
                self.env.progress.beat();
                return Step::Blocked;
            }
        }
        let done = self.running.round(self.env);
        self.held = self.running.holds();
        match done {
            RoundDone::Aborted => Step::Aborted,
            RoundDone::Finished if !self.held => Step::Done,
            RoundDone::Finished | RoundDone::Worked(0) if self.held => Step::Blocked,
            RoundDone::Worked(0) => Step::Idle,
            RoundDone::Finished | RoundDone::Worked(_) => Step::Progress,
        }
    }

    fn ready(&mut self) -> bool {
        self.held || self.running.has_work()
    }

    fn park(&mut self, timeout: Duration) -> bool {
        if self.held {
            self.running.park_held(timeout)
        } else {
            self.running.park(timeout)
        }
    }
}

#[cfg(test)]
mod tests {
    //! The scheduler's model: tasks joined by real threaded ports in random DAGs, with random
    //! queue capacities, placed on random workers in random orders, the workers' turns
    //! interleaved at random in one thread (so a failure is reproducible from its seed).

    use std::ops::ControlFlow;

    use proptest::prelude::*;
    use sluice_transport::{Delivery, ErasedReceiver, ErasedSender, StreamType, TransportSpec};

    use super::*;

    /// A model instance: it emits `count` tuples of its own (`(id << 32) | seq`, a few a
    /// step), passes on every tuple it receives to every output, and ends its outputs once it
    /// has emitted them all and every input has ended. Its step follows [`ThreadTask`]'s
    /// protocol: while a sender holds messages, it only flushes.
    struct ModelTask {
        id: u64,
        count: u64,
        batch: usize,
        inputs: Vec<Box<dyn ErasedReceiver>>,
        open_inputs: usize,
        outputs: Vec<Box<dyn ErasedSender>>,
        ended: bool,
        held: bool,
        /// Everything it sent, in order.
        emitted: Vec<u64>,
        /// Per input, everything received, in order.
        received: Vec<Vec<u64>>,
        steps: u64,
        /// Steps that found work though the task had said it was not ready.
        missed: u64,
    }

    impl ModelTask {
        /// How many of its own tuples it has emitted.
        fn own(&self) -> u64 {
            self.emitted.len() as u64 - self.received.iter().flatten().count() as u64
        }

        fn send(&mut self, tuple: u64) {
            self.emitted.push(tuple);
            for output in &mut self.outputs {
                output.offer_tuple(&mut Some(tuple)).unwrap();
            }
        }

        /// Flushes every sender; whether one still holds messages.
        fn flush(&mut self) -> bool {
            self.outputs.iter_mut().for_each(|o| o.flush());
            self.outputs.iter().any(|o| o.pending())
        }
    }

    impl Task for ModelTask {
        fn step(&mut self) -> Step {
            self.steps += 1;
            let ready = self.ready();
            let step = self.step_once();
            if !ready && step != Step::Idle {
                self.missed += 1;
            }
            step
        }

        /// Ready while it holds messages, has tuples of its own to emit or its end to send,
        /// or an input may have something.
        fn ready(&mut self) -> bool {
            self.held
                || !self.ended
                    && (self.own() < self.count
                        || self.open_inputs == 0
                        || self.inputs.iter_mut().any(|i| i.may_have_input()))
        }

        fn park(&mut self, _timeout: Duration) -> bool {
            false
        }
    }

    impl ModelTask {
        /// One step as [`ThreadTask`]'s protocol has it.
        fn step_once(&mut self) -> Step {
            if self.held {
                self.held = self.flush();
                if self.held {
                    return Step::Blocked;
                }
            }
            if self.ended {
                return Step::Done;
            }
            let own = self.own();
            let emit = (self.count - own).min(self.batch as u64);
            for seq in own..own + emit {
                self.send((self.id << 32) | seq);
            }
            let mut arrived = Vec::new();
            let mut ends = 0;
            for (k, input) in self.inputs.iter_mut().enumerate() {
                let polled = input.poll(self.batch, &mut |delivery| {
                    match delivery {
                        Delivery::Batch(batch) => {
                            arrived.extend(batch.iter_as::<u64>().map(|t| (k, *t)))
                        }
                        Delivery::EndOfStream => ends += 1,
                        Delivery::Punctuation(_) => {}
                    }
                    ControlFlow::Continue(())
                });
                polled.unwrap();
            }
            let mut work = emit as usize + arrived.len() + ends;
            for (k, tuple) in arrived {
                self.received[k].push(tuple);
                self.send(tuple);
            }
            self.open_inputs -= ends;
            if own + emit == self.count && self.open_inputs == 0 {
                for output in &mut self.outputs {
                    output.offer_end().unwrap();
                }
                self.ended = true;
                work += 1;
            }
            self.held = self.flush();
            match (self.held, work) {
                (false, _) if self.ended => Step::Done,
                (_, 1..) => Step::Progress,
                (true, 0) => Step::Blocked,
                (false, 0) => Step::Idle,
            }
        }
    }

    /// A random job: per task its upstream tasks (each earlier: a DAG), its own tuples, its
    /// batch, its worker and its rank on that worker; per edge a queue capacity; the order in
    /// which the workers take turns.
    #[derive(Debug, Clone)]
    struct Job {
        upstream: Vec<Vec<usize>>,
        counts: Vec<u64>,
        batches: Vec<usize>,
        capacities: Vec<usize>,
        workers: Vec<usize>,
        ranks: Vec<u64>,
        schedule: Vec<usize>,
        worker_count: usize,
    }

    fn job() -> impl Strategy<Value = Job> {
        (2usize..9, 1usize..4).prop_flat_map(|(tasks, worker_count)| {
            (
                proptest::collection::vec(proptest::collection::vec(any::<usize>(), 0..3), tasks),
                proptest::collection::vec(0u64..40, tasks),
                proptest::collection::vec(1usize..5, tasks),
                proptest::collection::vec(1usize..5, tasks * 2),
                proptest::collection::vec(0..worker_count, tasks),
                proptest::collection::vec(any::<u64>(), tasks),
                proptest::collection::vec(0..worker_count, 0..16),
            )
                .prop_map(
                    move |(picks, counts, batches, capacities, workers, ranks, schedule)| {
                        let upstream = picks
                            .iter()
                            .enumerate()
                            .map(|(t, picks)| {
                                let mut up: Vec<usize> =
                                    picks.iter().filter(|_| t > 0).map(|p| p % t).collect();
                                up.sort_unstable();
                                up.dedup();
                                up
                            })
                            .collect();
                        Job {
                            upstream,
                            counts,
                            batches,
                            capacities,
                            workers,
                            ranks,
                            // Every worker takes turns.
                            schedule: schedule.into_iter().chain(0..worker_count).collect(),
                            worker_count,
                        }
                    },
                )
        })
    }

    /// The most turns a job may take: far more than any needs when nothing deadlocks (a few
    /// thousand tuples cross at least one queue slot a turn).
    const TURN_LIMIT: usize = 200_000;

    /// Runs `job`; its tasks by id once every worker is done, or the turns it had when some
    /// worker was still not done after [`TURN_LIMIT`] turns.
    fn run(job: &Job) -> Result<Vec<ModelTask>, String> {
        let stream = StreamType::of::<u64>();
        let mut tasks: Vec<ModelTask> = (0..job.upstream.len())
            .map(|t| ModelTask {
                id: t as u64,
                count: job.counts[t],
                batch: job.batches[t],
                inputs: Vec::new(),
                open_inputs: job.upstream[t].len(),
                outputs: Vec::new(),
                ended: false,
                held: false,
                emitted: Vec::new(),
                received: vec![Vec::new(); job.upstream[t].len()],
                steps: 0,
                missed: 0,
            })
            .collect();
        let mut edge = 0;
        for (to, upstream) in job.upstream.iter().enumerate() {
            for &from in upstream {
                let capacity = job.capacities[edge % job.capacities.len()];
                edge += 1;
                let (mut tx, rx) = stream
                    .connect(&TransportSpec::Threaded { capacity })
                    .unwrap();
                tx.hold_when_full();
                tasks[from].outputs.push(tx);
                tasks[to].inputs.push(rx);
            }
        }
        let mut placed: Vec<Vec<ModelTask>> = (0..job.worker_count).map(|_| Vec::new()).collect();
        for task in tasks {
            placed[job.workers[task.id as usize]].push(task);
        }
        let mut rotations: Vec<Rotation<ModelTask>> = placed
            .into_iter()
            .map(|mut mine| {
                mine.sort_by_key(|t| job.ranks[t.id as usize]);
                Rotation::new(mine)
            })
            .collect();
        let mut ended = vec![false; rotations.len()];
        // Per worker, per task, turns since its last step.
        let mut unstepped: Vec<Vec<u32>> =
            rotations.iter().map(|r| vec![0; r.tasks.len()]).collect();
        for turn in 0..TURN_LIMIT {
            if ended.iter().all(|e| *e) {
                let mut tasks: Vec<ModelTask> = rotations
                    .into_iter()
                    .flat_map(Rotation::into_tasks)
                    .collect();
                tasks.sort_by_key(|t| t.id);
                return Ok(tasks);
            }
            let w = job.schedule[turn % job.schedule.len()];
            if ended[w] {
                continue;
            }
            let rotation = &mut rotations[w];
            let full = rotation.next_is_full();
            let before: Vec<u64> = rotation.tasks.iter().map(|t| t.steps).collect();
            let done_before = rotation.done.clone();
            // Within a turn a task's readiness only grows: only it takes from its inputs and
            // ends what it holds.
            let ready_before: Vec<bool> = rotation.tasks.iter_mut().map(|t| t.ready()).collect();
            match rotation.turn() {
                Ok(_) => {}
                Err(Ended::Done) => ended[w] = true,
                Err(Ended::Aborted) => return Err("a model task aborted".into()),
            }
            for (k, task) in rotation.tasks.iter().enumerate() {
                let stepped = task.steps - before[k];
                let must = !done_before[k] && (full || ready_before[k]);
                if stepped > 1 || (must && stepped == 0) || (done_before[k] && stepped > 0) {
                    return Err(format!(
                        "task {} took {stepped} steps in a turn (full {full}, ready {})",
                        task.id, ready_before[k]
                    ));
                }
                // No starvation: every task not done is stepped in every FULL_TURN_EVERY
                // turns of its worker.
                unstepped[w][k] = if stepped == 1 { 0 } else { unstepped[w][k] + 1 };
                if !rotation.done[k] && unstepped[w][k] >= FULL_TURN_EVERY {
                    return Err(format!(
                        "task {} not stepped for {FULL_TURN_EVERY} turns",
                        task.id
                    ));
                }
                if task.missed > 0 {
                    return Err(format!("task {} found work when it was not ready", task.id));
                }
            }
        }
        Err(format!(
            "deadlock: workers still running after {TURN_LIMIT} turns: {ended:?}"
        ))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// No deadlock, no starvation, and every edge delivers exactly what its upstream task
        /// sent, in order, whatever the graph, the capacities and the placement.
        #[test]
        fn every_tuple_arrives_in_order_on_every_edge_and_every_task_finishes(job in job()) {
            let tasks = run(&job).map_err(TestCaseError::fail)?;
            for (to, upstream) in job.upstream.iter().enumerate() {
                for (k, &from) in upstream.iter().enumerate() {
                    prop_assert_eq!(
                        &tasks[to].received[k],
                        &tasks[from].emitted,
                        "edge {} -> {}",
                        from,
                        to
                    );
                }
                prop_assert!(tasks[to].ended);
            }
        }
    }

    /// The case the blocking design deadlocks on, by hand: a source and its consumer on one
    /// worker, the consumer first, joined by a queue of one slot, with more tuples than fit.
    #[test]
    fn a_producer_and_its_consumer_share_a_worker_through_a_queue_of_one() {
        let job = Job {
            upstream: vec![vec![], vec![0], vec![0, 1]],
            counts: vec![100, 0, 0],
            batches: vec![4, 1, 1],
            capacities: vec![1],
            workers: vec![0, 0, 0],
            ranks: vec![2, 1, 0],
            schedule: vec![0],
            worker_count: 1,
        };
        let tasks = run(&job).unwrap();
        assert_eq!(tasks[2].received[1].len(), 100);
        assert_eq!(tasks[2].received[0], tasks[0].emitted);
    }
}
