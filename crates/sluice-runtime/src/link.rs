//! The stream between the launcher and each of its PEs, which carries the control protocol
//! ([`crate::wire`]): a Unix socket in the launcher's private job directory when every PE runs
//! on the launcher's machine, TCP to the launcher's address when the job has a hosts file (a
//! PE on another host cannot see that directory).
//!
//! Either way a PE opens the stream with the hello of the `tcp` transport carrying the job's
//! secret ([`sluice_transport::tcp::hello`]), then `Hello { pe }`; the launcher checks the
//! secret as a `tcp` receiver does (in constant time) and refuses, and reports, a peer without
//! it. The Unix socket's directory is made mode 0700 whatever the umask, and checked (a directory
//! of this user's, mode 0700, not a link) by the launcher before it listens there and by each PE
//! before it presents the secret there. A peer gets [`HANDSHAKE_PATIENCE`] to say both, each
//! checked on a thread of its own (at most [`MAX_HANDSHAKES`], or as many as the job has PEs, at
//! once: another pushes out the one that has waited longest), so silent strangers cannot hold
//! the start up or keep a PE out, and a job's own PEs, all connecting at once to a launcher
//! slow to read their hellos, never push each other out. The
//! TCP listener binds only to the address it is given, on a port the system picks, and is
//! closed once every PE is in.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{BufReader, Read, Write};
use std::net::{
    IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket,
};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::Duration;

use sluice_plan::HostSpec;
use sluice_transport::tcp::{self, JobSecret, TcpParams, HELLO_LEN};
use sluice_types::BytesTuple;

use crate::wire::{self, FromPe};
use crate::RunError;

/// How long a peer has to present the secret and say which PE it is.
pub(crate) const HANDSHAKE_PATIENCE: Duration = Duration::from_secs(10);
/// Handshakes checked at once at least (as many as the job has PEs when it has more); another
/// connection pushes out the one that has waited longest.
const MAX_HANDSHAKES: usize = 64;
/// How long a PE tries to reach its launcher's TCP address.
const CONNECT_PATIENCE: Duration = Duration::from_secs(10);

/// Where a PE reaches its launcher: the value of `SLUICE_CONTROL`, a socket's path or an
/// `address:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ControlAddress {
    /// A Unix socket on the launcher's machine (an absolute path).
    Unix(PathBuf),
    /// The launcher's TCP listener.
    Tcp(SocketAddr),
}

impl ControlAddress {
    /// The address as an environment variable's value.
    pub(crate) fn to_env(&self) -> OsString {
        match self {
            Self::Unix(path) => path.clone().into(),
            Self::Tcp(addr) => addr.to_string().into(),
        }
    }

    /// Reads a value written by [`ControlAddress::to_env`].
    pub(crate) fn from_env(value: &OsStr) -> Option<Self> {
        let path = Path::new(value);
        if path.is_absolute() {
            return Some(Self::Unix(path.to_path_buf()));
        }
        value.to_str()?.parse().ok().map(Self::Tcp)
    }
}

/// What the name of a job's private directory starts with.
pub(crate) const JOB_DIR_PREFIX: &str = "sluice-job-";
/// The name of the launcher's control socket in the job's private directory.
pub(crate) const CONTROL_SOCKET: &str = "control.sock";
/// The mode of the job's directory, which holds its control socket: its user's alone.
const PRIVATE_DIR_MODE: u32 = 0o700;

/// Makes the job's private directory (`sluice-job-PID-*` in the temporary directory, PID this
/// launcher's), mode 0700 whatever the umask, and removed when the guard drops. First removes
/// the directories that launchers which are gone left there: one killed before it started a
/// PE leaves its directory to nobody else.
pub(crate) fn private_job_dir() -> Result<tempfile::TempDir, RunError> {
    let cannot = |e: std::io::Error| {
        RunError::Launch(format!("cannot make the job's private directory: {e}"))
    };
    sweep_job_dirs(&std::env::temp_dir());
    let dir = tempfile::Builder::new()
        .prefix(&format!("{JOB_DIR_PREFIX}{}-", std::process::id()))
        .permissions(std::fs::Permissions::from_mode(PRIVATE_DIR_MODE))
        .tempdir()
        .map_err(cannot)?;
    // The umask may have narrowed the mode `mkdir` used; `chmod` is not subject to it.
    std::fs::set_permissions(
        dir.path(),
        std::fs::Permissions::from_mode(PRIVATE_DIR_MODE),
    )
    .map_err(cannot)?;
    check_private_dir(dir.path())?;
    Ok(dir)
}

/// Removes every job directory in `tmp` of a launcher that is gone: private (this user's), its
/// name's pid no longer a process.
fn sweep_job_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for dir in entries.flatten().map(|e| e.path()) {
        let launcher = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(JOB_DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| rustix::process::Pid::from_raw(pid.parse().ok()?));
        let gone = launcher.is_some_and(|pid| rustix::process::test_kill_process(pid).is_err());
        if gone && why_not_private(&dir).is_none() {
            remove_job_dir(&dir);
        }
    }
}

/// Removes a job's private directory `dir` and what a launcher puts in it (its control
/// socket, `mpirun`'s hostfile), when it is one: named as one, and private.
pub(crate) fn remove_job_dir(dir: &Path) {
    let is_job_dir = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(JOB_DIR_PREFIX));
    if is_job_dir && check_private_dir(dir).is_ok() {
        // Another PE, or another launcher's sweep, may be removing them too.
        for file in [CONTROL_SOCKET, crate::mpi::HOSTFILE] {
            let _ = std::fs::remove_file(dir.join(file));
        }
        let _ = std::fs::remove_dir(dir);
    }
}

/// Refuses `dir` unless it is a directory (not a link to one) of this user's with mode 0700:
/// no one else may reach the control socket in it.
pub(crate) fn check_private_dir(dir: &Path) -> Result<(), RunError> {
    match why_not_private(dir) {
        None => Ok(()),
        Some(why) => Err(RunError::Launch(format!(
            "the job's control directory {} is not private: {why}",
            dir.display()
        ))),
    }
}

/// Why `dir` is not a directory (not a link to one) of this user's with mode 0700, or `None`
/// when it is: the rule for every directory that holds a job's control socket (the job
/// registry's too).
pub fn why_not_private(dir: &Path) -> Option<String> {
    let metadata = match std::fs::symlink_metadata(dir) {
        Ok(metadata) => metadata,
        Err(e) => return Some(e.to_string()),
    };
    let uid = rustix::process::geteuid().as_raw();
    let mode = metadata.mode() & 0o7777;
    if !metadata.is_dir() {
        Some("it is not a directory".into())
    } else if metadata.uid() != uid {
        Some(format!("it belongs to uid {}, not {uid}", metadata.uid()))
    } else if mode != PRIVATE_DIR_MODE {
        Some(format!("its mode is {mode:04o}, not 0700"))
    } else {
        None
    }
}

/// The private directory a control socket at `path` must be in.
fn socket_dir(path: &Path) -> Result<&Path, RunError> {
    path.parent().ok_or_else(|| {
        RunError::Launch(format!(
            "the control socket {} has no directory",
            path.display()
        ))
    })
}

/// The hello that opens a control stream: the `tcp` transport's, as its only sender of bytes.
fn control_hello(secret: &JobSecret) -> Result<[u8; HELLO_LEN], RunError> {
    tcp::hello::<BytesTuple>(secret, 0, &TcpParams::default())
        .map_err(|e| RunError::Launch(format!("control hello: {e}")))
}

/// Whether `hello` presents `secret` (and is a control hello).
fn admits(hello: &[u8; HELLO_LEN], secret: &JobSecret) -> bool {
    matches!(
        tcp::accepted_sender::<BytesTuple>(hello, secret, 1, &TcpParams::default()),
        Ok(Some(0))
    )
}

/// One end of a control stream.
#[derive(Debug)]
pub(crate) enum Link {
    /// Over a Unix socket.
    Unix(UnixStream),
    /// Over TCP.
    Tcp(TcpStream),
}

impl Link {
    /// Connects to the launcher at `address` and presents `secret` and `pe`.
    pub(crate) fn open(
        address: &ControlAddress,
        secret: &JobSecret,
        pe: usize,
    ) -> Result<Self, RunError> {
        let unreachable =
            |e: std::io::Error| RunError::Launch(format!("cannot reach the launcher: {e}"));
        let mut link = match address {
            ControlAddress::Unix(path) => {
                // The secret goes only to a socket no one else can have put there.
                check_private_dir(socket_dir(path)?)?;
                Self::Unix(UnixStream::connect(path).map_err(unreachable)?)
            }
            ControlAddress::Tcp(addr) => {
                let stream = TcpStream::connect_timeout(addr, CONNECT_PATIENCE).map_err(|e| {
                    RunError::Launch(format!(
                        "cannot reach the launcher at {addr}: {e} (every host must reach the \
                         hosts file's [launcher] address)"
                    ))
                })?;
                // Control messages are small and each is waited for.
                stream.set_nodelay(true).map_err(unreachable)?;
                Self::Tcp(stream)
            }
        };
        link.write_all(&control_hello(secret)?)
            .and_then(|()| wire::send(&mut link, &FromPe::Hello { pe }))
            .map_err(unreachable)?;
        Ok(link)
    }

    /// Another handle to the same stream (one reads while another writes).
    pub(crate) fn try_clone(&self) -> std::io::Result<Self> {
        Ok(match self {
            Self::Unix(s) => Self::Unix(s.try_clone()?),
            Self::Tcp(s) => Self::Tcp(s.try_clone()?),
        })
    }

    /// Shuts both directions of the stream: a read blocked on it returns.
    fn shutdown(&self) {
        // A stream already closed needs nothing more.
        let _ = match self {
            Self::Unix(s) => s.shutdown(Shutdown::Both),
            Self::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }

    /// How long a read may wait for a byte (`None`: for ever); a longer wait fails with
    /// `WouldBlock` or `TimedOut`. It holds for every handle to the stream.
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Self::Unix(s) => s.set_read_timeout(timeout),
            Self::Tcp(s) => s.set_read_timeout(timeout),
        }
    }

    /// How long a write may wait for room (`None`: for ever), for every handle to the stream.
    pub(crate) fn set_write_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Self::Unix(s) => s.set_write_timeout(timeout),
            Self::Tcp(s) => s.set_write_timeout(timeout),
        }
    }
}

/// The writing end of a control stream, shared by the threads that write to it (the heartbeat
/// and everything else): each message goes whole, never interleaved with another.
#[derive(Clone)]
pub(crate) struct SharedLink(Arc<Mutex<Link>>);

impl SharedLink {
    pub(crate) fn new(link: Link) -> Self {
        Self(Arc::new(Mutex::new(link)))
    }

    /// Writes `message` ([`wire::send_message`]).
    pub(crate) fn send<T: wire::Message>(&self, message: &T) -> std::io::Result<()> {
        // A writer that panicked left at most a cut line, which the peer refuses anyway.
        let mut link = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        wire::send_message(&mut *link, message)
    }

    /// Writes `message` unless another thread is writing one now, whose bytes tell the peer
    /// that this end lives as well (a heartbeat must not wait behind a large state's frames,
    /// nor hold up the beats of other links).
    pub(crate) fn send_unless_busy<T: wire::Message>(&self, message: &T) -> std::io::Result<()> {
        let mut link = match self.0.try_lock() {
            Ok(link) => link,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(()),
        };
        wire::send_message(&mut *link, message)
    }
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Unix(s) => s.read(buf),
            Self::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Unix(s) => s.write(buf),
            Self::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Unix(s) => s.flush(),
            Self::Tcp(s) => s.flush(),
        }
    }
}

/// What became of a connection to the launcher's listener.
pub(crate) enum Admission {
    /// A PE presented the secret and said which it is: the stream to write to it, and the
    /// reader its messages come through.
    Admitted {
        pe: usize,
        link: Link,
        reader: BufReader<Link>,
    },
    /// A peer was turned away.
    Refused { peer: String, why: &'static str },
    /// This launcher could not take the connection in (out of descriptors): the job fails.
    Failed(RunError),
}

/// The launcher's failure to take its PEs' connections in, naming the limit on open files
/// when that is what it ran into (each PE's stream takes two descriptors in the launcher).
fn cannot_take_connections(error: &std::io::Error) -> RunError {
    RunError::Launch(format!(
        "the launcher cannot take its PEs' control connections: {error}{}",
        open_files_note(error)
    ))
}

/// For an error that is this process running out of descriptors (EMFILE), the limit it ran
/// into; else nothing.
pub(crate) fn open_files_note(error: &std::io::Error) -> String {
    if error.raw_os_error() != Some(rustix::io::Errno::MFILE.raw_os_error()) {
        return String::new();
    }
    match rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
        Some(limit) => {
            format!(" (this process may have {limit} open files, its `ulimit -n`: raise it)")
        }
        None => String::new(),
    }
}

/// The launcher's listener for its PEs.
pub(crate) enum LinkListener {
    /// A Unix socket (in a directory only the launcher's user can enter).
    Unix(UnixListener),
    /// TCP on one address.
    Tcp(TcpListener),
}

impl LinkListener {
    /// Listens on a Unix socket at `path`, in a private directory
    /// ([`check_private_dir`]).
    pub(crate) fn unix(path: &Path) -> Result<Self, RunError> {
        check_private_dir(socket_dir(path)?)?;
        // The umask narrows the socket's mode too, and connecting needs write permission: its
        // user's alone, set before any PE is started.
        let listener = UnixListener::bind(path)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(|l| {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map(|()| l)
            })
            .map_err(|e| RunError::Launch(format!("cannot listen for PEs: {e}")))?;
        Ok(Self::Unix(listener))
    }

    /// Listens on TCP at `ip` alone, on a port the system picks.
    pub(crate) fn tcp(ip: IpAddr) -> Result<Self, RunError> {
        let listener = TcpListener::bind((ip, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| RunError::Launch(format!("cannot listen for PEs on {ip}: {e}")))?;
        Ok(Self::Tcp(listener))
    }

    /// Where PEs reach it.
    pub(crate) fn address(&self) -> Result<ControlAddress, RunError> {
        let lost = |e: std::io::Error| RunError::Launch(format!("control listener: {e}"));
        match self {
            Self::Unix(l) => l
                .local_addr()
                .map_err(lost)?
                .as_pathname()
                .map(|p| ControlAddress::Unix(p.to_path_buf()))
                .ok_or_else(|| RunError::Launch("the control socket has no path".into())),
            Self::Tcp(l) => l.local_addr().map(ControlAddress::Tcp).map_err(lost),
        }
    }

    /// Accepts the connections waiting and checks each on a thread of its own, which sends
    /// what became of it to `admissions`. Returns at once.
    pub(crate) fn admit(
        &self,
        secret: &JobSecret,
        handshakes: &Handshakes,
        admissions: &Sender<Admission>,
    ) -> Result<(), RunError> {
        loop {
            let accepted = match self {
                Self::Unix(l) => l
                    .accept()
                    .map(|(s, _)| (Link::Unix(s), "a local process".into())),
                Self::Tcp(l) => l.accept().map(|(s, peer)| {
                    let _ = s.set_nodelay(true);
                    (Link::Tcp(s), peer.to_string())
                }),
            };
            let (link, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(cannot_take_connections(&e)),
            };
            // Cloning a descriptor fails for this process's reasons alone (out of descriptors).
            let handshake_id = handshakes
                .begin(&link)
                .map_err(|e| cannot_take_connections(&e))?;
            let (secret, handshakes, admissions) =
                (secret.clone(), handshakes.clone(), admissions.clone());
            std::thread::spawn(move || {
                let admission = handshake(link, peer.clone(), &secret);
                let admission = if handshakes.end(handshake_id) {
                    admission
                } else {
                    Admission::Refused {
                        peer,
                        why: "it had waited longest for its hello when more connections came",
                    }
                };
                let _ = admissions.send(admission);
            });
        }
    }
}

/// The handshakes under way on a listener, oldest first, each with a handle on its stream:
/// when its room is full, a new connection pushes out (shuts the stream of) the one that has
/// waited longest, so that silent connections cannot keep a PE out. The room holds every PE
/// of the job (at least [`MAX_HANDSHAKES`]): when they all connect at once, to a launcher on a
/// loaded machine slow to read their hellos, none pushes another out (332 PEs on two busy
/// cores did, failing the start).
#[derive(Clone)]
pub(crate) struct Handshakes(Arc<Mutex<PendingHandshakes>>);

/// What [`Handshakes`] guards.
struct PendingHandshakes {
    next_id: u64,
    /// Oldest first: each handshake's number, and a clone of its stream.
    streams: VecDeque<(u64, Link)>,
    /// How many may be under way at once.
    room: usize,
}

impl Default for Handshakes {
    /// Room for [`MAX_HANDSHAKES`].
    fn default() -> Self {
        Self::for_peers(0)
    }
}

impl Handshakes {
    /// Room for `peers` handshakes at once, and at least [`MAX_HANDSHAKES`].
    pub(crate) fn for_peers(peers: usize) -> Self {
        Self(Arc::new(Mutex::new(PendingHandshakes {
            next_id: 0,
            streams: VecDeque::new(),
            room: peers.max(MAX_HANDSHAKES),
        })))
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, PendingHandshakes> {
        // A panic while holding the lock leaves the queue whole (it only pushes and pops).
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a handshake on `link`, first pushing out the oldest if the room is full;
    /// returns its number.
    fn begin(&self, link: &Link) -> std::io::Result<u64> {
        let handle = link.try_clone()?;
        let mut pending = self.pending();
        if pending.streams.len() >= pending.room {
            if let Some((_, oldest)) = pending.streams.pop_front() {
                // Its thread's read then fails, and finds it was pushed out.
                oldest.shutdown();
            }
        }
        let id = pending.next_id;
        pending.next_id += 1;
        pending.streams.push_back((id, handle));
        Ok(id)
    }

    /// Ends handshake `id`; false if it was pushed out.
    fn end(&self, id: u64) -> bool {
        let mut pending = self.pending();
        let at = pending.streams.iter().position(|(i, _)| *i == id);
        at.and_then(|at| pending.streams.remove(at)).is_some()
    }
}

/// Reads a peer's hello and `Hello { pe }` within [`HANDSHAKE_PATIENCE`].
fn handshake(link: Link, peer: String, secret: &JobSecret) -> Admission {
    let refused = |why| Admission::Refused {
        peer: peer.clone(),
        why,
    };
    if link.set_read_timeout(Some(HANDSHAKE_PATIENCE)).is_err() {
        return refused("its connection failed");
    }
    let mut reader = match link.try_clone() {
        Ok(reader) => BufReader::new(reader),
        // This process's failure, not the peer's: the job cannot go on.
        Err(e) => return Admission::Failed(cannot_take_connections(&e)),
    };
    let mut hello = [0u8; HELLO_LEN];
    if reader.read_exact(&mut hello).is_err() {
        return refused("it did not present a hello in time");
    }
    if !admits(&hello, secret) {
        return refused("it did not present the job's secret");
    }
    let pe = match wire::receive::<FromPe>(&mut reader) {
        Ok(Some(FromPe::Hello { pe })) => pe,
        _ => return refused("it did not say which PE it is"),
    };
    if link.set_read_timeout(None).is_err() {
        return refused("its connection failed");
    }
    Admission::Admitted { pe, link, reader }
}

/// The address the launcher's TCP listener binds to for PEs on `hosts`: `configured` if the
/// hosts file sets one, else the address of this machine its routes use toward the hosts
/// (their loopback address only if every host is this machine).
pub(crate) fn launcher_ip<'a>(
    configured: Option<IpAddr>,
    hosts: impl IntoIterator<Item = &'a HostSpec>,
) -> Result<IpAddr, RunError> {
    if let Some(ip) = configured {
        return Ok(ip);
    }
    let mut found: Vec<IpAddr> = Vec::new();
    for host in hosts {
        let any = match host.address {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        // Connecting a UDP socket sends nothing; it only picks the route and its source.
        let source = UdpSocket::bind((any, 0))
            .and_then(|s| s.connect((host.address, 9)).and_then(|()| s.local_addr()))
            .map_err(|e| {
                RunError::Launch(format!(
                    "cannot tell which address of this machine host '{}' ({}) reaches: {e}; \
                     set `[launcher] address` in the hosts file",
                    host.name, host.address
                ))
            })?;
        if !found.contains(&source.ip()) {
            found.push(source.ip());
        }
    }
    let outward: Vec<IpAddr> = found
        .iter()
        .copied()
        .filter(|ip| !ip.is_loopback())
        .collect();
    match (outward.as_slice(), found.first()) {
        ([one], _) => Ok(*one),
        ([], Some(&loopback)) => Ok(loopback),
        ([], None) => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        (several, _) => Err(RunError::Launch(format!(
            "the hosts are reached through different addresses of this machine ({}); set \
             `[launcher] address` in the hosts file to one every host reaches",
            several
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn admitted(listener: &LinkListener, secret: &JobSecret, connect: impl FnOnce()) -> Admission {
        let (sent, received) = mpsc::channel();
        let handshakes = Handshakes::default();
        connect();
        loop {
            listener.admit(secret, &handshakes, &sent).unwrap();
            if let Ok(admission) = received.recv_timeout(Duration::from_millis(10)) {
                return admission;
            }
        }
    }

    #[test]
    fn a_pe_with_the_secret_is_admitted_over_tcp_and_a_stranger_is_refused() {
        let secret = JobSecret::random().unwrap();
        let listener = LinkListener::tcp(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let address = listener.address().unwrap();
        let ControlAddress::Tcp(addr) = address.clone() else {
            panic!("{address:?}")
        };
        assert!(addr.ip().is_loopback() && addr.port() != 0);
        assert_eq!(
            ControlAddress::from_env(&address.to_env()),
            Some(address.clone())
        );

        let mut pe = None;
        match admitted(&listener, &secret, || {
            pe = Some(Link::open(&address, &secret, 3).unwrap())
        }) {
            Admission::Admitted { pe, .. } => assert_eq!(pe, 3),
            Admission::Refused { why, .. } => panic!("refused: {why}"),
            Admission::Failed(error) => panic!("{error}"),
        }

        // A stranger with another secret, and one sending the right bytes' worth of junk.
        let other = JobSecret::random().unwrap();
        let mut stranger = None;
        match admitted(&listener, &secret, || {
            stranger = Some(Link::open(&address, &other, 0).unwrap())
        }) {
            Admission::Refused { why, peer } => {
                assert_eq!(why, "it did not present the job's secret");
                assert!(peer.starts_with("127.0.0.1:"), "{peer}");
            }
            Admission::Admitted { .. } => panic!("a stranger was admitted"),
            Admission::Failed(error) => panic!("{error}"),
        }
        let mut stranger = stranger.unwrap();
        let mut byte = [0u8];
        assert!(
            matches!(stranger.read(&mut byte), Ok(0) | Err(_)),
            "the stranger's connection is closed"
        );
        let mut junk = None;
        let refused = admitted(&listener, &secret, || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&[0x5a; HELLO_LEN]).unwrap();
            junk = Some(s);
        });
        assert!(matches!(refused, Admission::Refused { .. }));
    }

    #[test]
    fn the_job_directory_is_private_and_checked_on_use() {
        let dir = private_job_dir().unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        let socket = dir.path().join("control.sock");
        drop(LinkListener::unix(&socket).unwrap());
        std::fs::remove_file(&socket).unwrap();
        // Opened up afterwards: neither the launcher nor a PE uses it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let message = LinkListener::unix(&socket).err().unwrap().to_string();
        assert!(message.contains("its mode is 0755, not 0700"), "{message}");
        let secret = JobSecret::random().unwrap();
        let message = Link::open(&ControlAddress::Unix(socket), &secret, 0)
            .unwrap_err()
            .to_string();
        assert!(message.contains("is not private"), "{message}");
    }

    #[test]
    fn a_new_handshake_pushes_out_the_one_that_waited_longest() {
        for (handshakes, room) in [
            (Handshakes::default(), MAX_HANDSHAKES),
            (Handshakes::for_peers(10), MAX_HANDSHAKES),
            (Handshakes::for_peers(100), 100),
        ] {
            check_room(&handshakes, room);
        }
    }

    /// Checks that `handshakes` takes `room` at once and pushes out the oldest for one more.
    fn check_room(handshakes: &Handshakes, room: usize) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut peers = Vec::new();
        let mut ids = Vec::new();
        for _ in 0..=room {
            peers.push(TcpStream::connect(addr).unwrap());
            let (stream, _) = listener.accept().unwrap();
            ids.push(handshakes.begin(&Link::Tcp(stream)).unwrap());
        }
        // The first was pushed out: its peer finds the stream shut, and its end says so.
        peers[0]
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        assert!(matches!(peers[0].read(&mut [0]), Ok(0) | Err(_)));
        assert!(!handshakes.end(ids[0]));
        assert!(ids[1..].iter().all(|&id| handshakes.end(id)));
    }

    #[test]
    fn unix_links_carry_the_same_handshake() {
        let dir = private_job_dir().unwrap();
        let listener = LinkListener::unix(&dir.path().join("control.sock")).unwrap();
        let address = listener.address().unwrap();
        assert!(matches!(address, ControlAddress::Unix(_)));
        assert_eq!(
            ControlAddress::from_env(&address.to_env()),
            Some(address.clone())
        );
        let secret = JobSecret::random().unwrap();
        let mut pe = None;
        let admission = admitted(&listener, &secret, || {
            pe = Some(Link::open(&address, &secret, 1).unwrap())
        });
        assert!(matches!(admission, Admission::Admitted { pe: 1, .. }));
        let mut stranger = None;
        let other = JobSecret::random().unwrap();
        let admission = admitted(&listener, &secret, || {
            stranger = Some(Link::open(&address, &other, 1).unwrap())
        });
        assert!(matches!(admission, Admission::Refused { .. }));
    }

    #[test]
    fn the_launcher_ip_is_the_configured_one_or_the_route_toward_the_hosts() {
        let host = |address: &str| HostSpec {
            name: "h".into(),
            address: address.parse().unwrap(),
            cores: 1,
            groups: Vec::new(),
            launch: Vec::new(),
        };
        let configured: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(launcher_ip(Some(configured), &[]).unwrap(), configured);
        assert_eq!(
            launcher_ip(None, &[host("127.0.0.1")]).unwrap(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert_eq!(
            launcher_ip(None, &[]).unwrap(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
    }
}
