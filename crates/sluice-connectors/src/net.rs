//! Where a network source or sink meets its peer: a TCP endpoint (listen on an address, or
//! connect to one with a bounded retry), and [`OnBound`], which tells the caller the address
//! a listening operator was bound to (the port the system picked for port 0).
//!
//! A listener binds to the address it is given and to no other (`127.0.0.1` listens on
//! loopback only; `0.0.0.0` on every interface, only when asked).

use std::fmt;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_graph::OperatorError;

/// How long a listening sink waits for its client unless told otherwise.
pub const DEFAULT_ACCEPT_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a listening sink looks for its client while it waits.
const ACCEPT_POLL: Duration = Duration::from_millis(2);

/// Called with the address a listening operator was bound to, once it is bound.
#[derive(Clone)]
pub struct OnBound(Arc<dyn Fn(SocketAddr) + Send + Sync>);

impl OnBound {
    /// Calls `report` with the bound address.
    pub fn new(report: impl Fn(SocketAddr) + Send + Sync + 'static) -> Self {
        Self(Arc::new(report))
    }

    /// Tells it `address`.
    pub(crate) fn report(&self, address: SocketAddr) {
        (self.0)(address)
    }
}

impl fmt::Debug for OnBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnBound(..)")
    }
}

/// Listening for TCP connections on one address.
#[derive(Debug, Clone)]
pub struct TcpListen {
    /// The address to bind (port 0: the system picks one, told to `on_bound`).
    pub address: SocketAddr,
    /// Told the bound address once the listener is bound.
    pub on_bound: Option<OnBound>,
    /// How long a sink waits for its one client before failing (a source accepts
    /// connections for as long as it runs).
    pub accept_timeout: Duration,
}

impl TcpListen {
    /// Listening on `address`, waiting [`DEFAULT_ACCEPT_TIMEOUT`] for a sink's client.
    pub fn new(address: SocketAddr) -> Self {
        Self {
            address,
            on_bound: None,
            accept_timeout: DEFAULT_ACCEPT_TIMEOUT,
        }
    }

    /// Tells `report` the bound address.
    pub fn on_bound(mut self, report: impl Fn(SocketAddr) + Send + Sync + 'static) -> Self {
        self.on_bound = Some(OnBound::new(report));
        self
    }

    /// Binds a non-blocking listener to the address and reports where it is bound.
    pub(crate) fn bind(&self) -> Result<TcpListener, OperatorError> {
        let context = || format!("listen on {}", self.address);
        let listener =
            TcpListener::bind(self.address).map_err(|e| OperatorError::io(context(), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| OperatorError::io(context(), e))?;
        if let Some(on_bound) = &self.on_bound {
            on_bound.report(
                listener
                    .local_addr()
                    .map_err(|e| OperatorError::io(context(), e))?,
            );
        }
        Ok(listener)
    }

    /// Binds, waits for one client (at most `accept_timeout`) and stops listening.
    fn accept_one(&self) -> Result<TcpStream, OperatorError> {
        let listener = self.bind()?;
        let deadline = Instant::now() + self.accept_timeout;
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|e| OperatorError::io(format!("accept on {}", self.address), e))?;
                    return Ok(stream);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(OperatorError::Failed(format!(
                            "no client connected to {} within {:?}",
                            self.address, self.accept_timeout
                        )));
                    }
                    std::thread::sleep(ACCEPT_POLL);
                }
                Err(e) => {
                    return Err(OperatorError::io(format!("accept on {}", self.address), e));
                }
            }
        }
    }
}

/// Connecting to a TCP server, trying again a bounded number of times (the server may start
/// after the job).
#[derive(Debug, Clone)]
pub struct TcpConnect {
    /// The server's address.
    pub address: SocketAddr,
    /// Attempts before giving up (at least 1).
    pub attempts: u32,
    /// The pause between attempts.
    pub retry_interval: Duration,
    /// How long one attempt may take.
    pub attempt_timeout: Duration,
}

impl TcpConnect {
    /// Connecting to `address`: 50 attempts 100 ms apart, each of at most 5 s.
    pub fn new(address: SocketAddr) -> Self {
        Self {
            address,
            attempts: 50,
            retry_interval: Duration::from_millis(100),
            attempt_timeout: Duration::from_secs(5),
        }
    }

    /// Connects, trying up to `attempts` times; the error is the last attempt's.
    fn connect(&self) -> Result<TcpStream, OperatorError> {
        let attempts = self.attempts.max(1);
        let mut attempt = 1;
        loop {
            match TcpStream::connect_timeout(&self.address, self.attempt_timeout) {
                Ok(stream) => return Ok(stream),
                Err(e) if attempt >= attempts => {
                    return Err(OperatorError::io(
                        format!("connect to {} ({attempts} attempts)", self.address),
                        e,
                    ));
                }
                Err(_) => {
                    attempt += 1;
                    std::thread::sleep(self.retry_interval);
                }
            }
        }
    }
}

/// Which side of a TCP connection an operator takes.
#[derive(Debug, Clone)]
pub enum TcpEndpoint {
    /// It listens: a source accepts any number of connections, a sink one client.
    Listen(TcpListen),
    /// It connects to a server.
    Connect(TcpConnect),
}

impl TcpEndpoint {
    /// Listening on `address`, with the defaults of [`TcpListen::new`].
    pub fn listen(address: SocketAddr) -> Self {
        Self::Listen(TcpListen::new(address))
    }

    /// Connecting to `address`, with the defaults of [`TcpConnect::new`].
    pub fn connect(address: SocketAddr) -> Self {
        Self::Connect(TcpConnect::new(address))
    }

    /// The address it listens on or connects to.
    pub fn address(&self) -> SocketAddr {
        match self {
            Self::Listen(listen) => listen.address,
            Self::Connect(connect) => connect.address,
        }
    }

    /// One connection in blocking mode: the one client of a listener, or the server.
    pub(crate) fn open_one(&self) -> Result<TcpStream, OperatorError> {
        match self {
            Self::Listen(listen) => listen.accept_one(),
            Self::Connect(connect) => connect.connect(),
        }
    }
}

impl From<TcpListen> for TcpEndpoint {
    fn from(listen: TcpListen) -> Self {
        Self::Listen(listen)
    }
}

impl From<TcpConnect> for TcpEndpoint {
    fn from(connect: TcpConnect) -> Self {
        Self::Connect(connect)
    }
}
