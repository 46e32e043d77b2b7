//! A real Apache Kafka broker for the tests: KRaft mode (broker and controller in one JVM),
//! started once per test binary on free loopback ports with a fresh data directory, from the
//! jars `scripts/kafka fetch` keeps outside the repository.
//!
//! The broker is shared by every test of the binary ([`broker`]); a test that stops it or
//! restarts it starts one of its own ([`Broker::start`], [`Broker::down`], [`Broker::up`]).
//! A watcher shell beside each runs it, stops and starts it when asked, and stops it and
//! removes its data directory when the test process exits, however it exits (a static is
//! never dropped). Under `CI=true` a broker that cannot start fails the test with
//! the reason; elsewhere the test prints the reason and skips.

use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

/// How long the broker may take to answer its first metadata request.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// How long the broker may take to stop when asked.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running broker; dropping it stops it and removes its files.
pub struct Broker {
    /// `host:port` of its PLAINTEXT listener, for `bootstrap.servers`.
    pub address: String,
    watcher: Child,
    dir: PathBuf,
}

impl Drop for Broker {
    fn drop(&mut self) {
        // The watcher stops the broker and removes the data when it is signalled.
        let _ = Command::new("kill")
            .arg(self.watcher.id().to_string())
            .status();
        let _ = self.watcher.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The shared broker, started on first use; `None` (after printing why) if it cannot start
/// outside CI. Under `CI=true` a broker that cannot start panics with the reason.
pub fn broker() -> Option<&'static Broker> {
    static BROKER: OnceLock<Result<Broker, String>> = OnceLock::new();
    match BROKER.get_or_init(Broker::start) {
        Ok(broker) => Some(broker),
        Err(reason) => {
            cannot_start(reason);
            None
        }
    }
}

/// Under `CI=true` panics with `reason`; elsewhere prints that the test is skipped for it.
fn cannot_start(reason: &str) {
    sluice_skip::skip(format!(
        "the Kafka broker for the tests could not start: {reason}"
    ));
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

fn scripts_kafka() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka")
}

impl Broker {
    /// Starts a broker of the caller's own; under `CI=true` one that cannot start panics,
    /// elsewhere it is `None` after printing why (as [`broker`]).
    pub fn own() -> Option<Broker> {
        Broker::start().map_err(|reason| cannot_start(&reason)).ok()
    }

    /// Stops the broker (its process ends; its data stays) and waits until it has.
    pub fn down(&self) {
        std::fs::write(self.dir.join("down"), b"").expect("the broker's down file");
        let deadline = Instant::now() + STOP_TIMEOUT;
        while !self.dir.join("stopped").exists() {
            assert!(
                Instant::now() < deadline,
                "the broker at {} did not stop within {STOP_TIMEOUT:?}",
                self.address
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("Kafka broker at {} stopped", self.address);
    }

    /// Starts the broker again on its data after [`Broker::down`], and waits until it answers.
    pub fn up(&self) {
        std::fs::remove_file(self.dir.join("down")).expect("the broker's down file");
        // The watcher removes `stopped` as it starts the broker again.
        while self.dir.join("stopped").exists() {
            std::thread::sleep(Duration::from_millis(50));
        }
        wait_until_answering(self).unwrap_or_else(|reason| panic!("{reason}"));
        eprintln!("Kafka broker at {} answers again", self.address);
    }

    fn start() -> Result<Broker, String> {
        let began = Instant::now();
        let classpath = Command::new("bash")
            .arg(scripts_kafka())
            .arg("classpath")
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run scripts/kafka classpath: {e}"))?;
        if !classpath.status.success() {
            return Err(format!(
                "scripts/kafka classpath failed ({}): are java and mvn installed?",
                classpath.status
            ));
        }
        let classpath = String::from_utf8_lossy(&classpath.stdout).trim().to_owned();
        let dir = tempfile::Builder::new()
            .prefix("sluice-kafka-test")
            .tempdir()
            .map_err(|e| format!("no temporary directory: {e}"))?
            .keep();
        let (port, controller) = (free_port()?, free_port()?);
        let properties = dir.join("server.properties");
        std::fs::write(
            &properties,
            format!(
                "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{controller}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             inter.broker.listener.name=PLAINTEXT\n\
             log.dirs={}\n\
             num.partitions=3\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=1\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             transaction.state.log.num.partitions=1\n\
             group.initial.rebalance.delay.ms=0\n",
                dir.join("data").display()
            ),
        )
        .map_err(|e| format!("cannot write {}: {e}", properties.display()))?;
        let format = Command::new("java")
            .args(["-cp", &classpath, "kafka.tools.StorageTool", "format"])
            .args(["-t", "c2x1aWNlLWthZmthLXRzdA", "-c"])
            .arg(&properties)
            .output()
            .map_err(|e| format!("cannot run java (is a JRE 17 installed?): {e}"))?;
        if !format.status.success() {
            return Err(format!(
                "kafka-storage format failed: {}",
                String::from_utf8_lossy(&format.stderr)
            ));
        }
        // The watcher runs the broker; stops it while the file `down` exists (then says so
        // with the file `stopped`) and starts it again once `down` is gone; and stops it and
        // removes its data once this test process is gone, or the broker ended by itself, or the
        // watcher is signalled.
        let script = format!(
        "run() {{ java -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp '{classpath}' kafka.Kafka '{props}' >>'{log}' 2>&1 & broker=$!; }}; \
         run; \
         trap '[ -n \"$broker\" ] && kill $broker && wait $broker; rm -rf \"{dir}\"; exit 0' TERM; \
         while kill -0 {parent} 2>/dev/null; do \
           if [ -e '{dir}/down' ]; then \
             if [ -n \"$broker\" ]; then kill $broker; wait $broker; broker=; touch '{dir}/stopped'; fi; \
           elif [ -z \"$broker\" ]; then rm -f '{dir}/stopped'; run; \
           elif ! kill -0 $broker 2>/dev/null; then break; fi; \
           sleep 0.2; \
         done; \
         [ -n \"$broker\" ] && kill $broker 2>/dev/null; wait; rm -rf '{dir}'",
        props = properties.display(),
        log = dir.join("broker.log").display(),
        dir = dir.display(),
        parent = std::process::id(),
    );
        let watcher = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the broker: {e}"))?;
        let broker = Broker {
            address: format!("127.0.0.1:{port}"),
            watcher,
            dir,
        };
        wait_until_answering(&broker)?;
        eprintln!(
            "Kafka broker at {} answered {:.1} s after start",
            broker.address,
            began.elapsed().as_secs_f64()
        );
        Ok(broker)
    }
}

fn wait_until_answering(broker: &Broker) -> Result<(), String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .create()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match consumer.fetch_metadata(None, Duration::from_secs(1)) {
            Ok(metadata) if !metadata.brokers().is_empty() => return Ok(()),
            outcome => {
                if Instant::now() > deadline {
                    let log =
                        std::fs::read_to_string(broker.dir.join("broker.log")).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    return Err(format!(
                        "no answer from {} within {START_TIMEOUT:?} ({:?}); its log ends:\n{}",
                        broker.address,
                        outcome.err(),
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    ));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// An admin client of `broker`.
fn admin(broker: &Broker) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .create()
        .expect("an admin client")
}

/// Creates `topic` with `partitions` partitions on the broker.
pub fn create_topic(broker: &Broker, topic: &str, partitions: i32) {
    let admin = admin(broker);
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let results = block_on(admin.create_topics([&new], &options)).expect("create_topics");
    for result in results {
        result.unwrap_or_else(|(name, e)| panic!("cannot create topic {name}: {e}"));
    }
}

/// Gives `topic` `total` partitions in all.
pub fn add_partitions(broker: &Broker, topic: &str, total: usize) {
    let admin = admin(broker);
    let new = NewPartitions::new(topic, total);
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let results = block_on(admin.create_partitions([&new], &options)).expect("create_partitions");
    for result in results {
        result.unwrap_or_else(|(name, e)| panic!("cannot add partitions to {name}: {e}"));
    }
}

/// Wakes the thread blocked in [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread (the admin client's futures are completed by
/// librdkafka's own thread).
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
}
