//! Standalone mode: a built-in HTTP/1.1 server (hyper) that answers `GET` and `HEAD` of exactly
//! the published validation files (`text/plain`) and `404` for everything else.
//!
//! Request paths are compared byte for byte with `/.well-known/pki-validation/<MD5>.txt` or
//! `/.well-known/acme-challenge/<token>`:
//! nothing is decoded or normalised, so `..`, `%2e%2e`, `//` and the like never match; a query
//! string is ignored on a published path (as a static file server does) and a request for
//! anything else is `404`. The `Host` header is not consulted: one server answers for every
//! domain of the certificates it serves.
//!
//! The files come from one of two sources: an in-memory set that the process running the
//! server fills ([`StandaloneServer::add_file`], the server inside `renew`), or a directory
//! opened once ([`StandaloneServer::from_listener_dir`], `cert-agent serve`). A directory is
//! read through its open descriptor only: the request's file name must be a validation file
//! name of the request's directory (32 upper-case hex digits and `.txt`, or an ACME token)
//! before anything is opened, the file is opened
//! with `openat(O_NOFOLLOW)` (a symbolic link is never followed), must be a regular file of at
//! most [`super::MAX_CONTENT_BYTES`] bytes and must pass the content check of
//! [`ValidationFile`]; anything else is `404`. Because only the descriptor is used, a process
//! that dropped its privileges after opening the directory needs no access to the directories
//! above it.
//!
//! Limits: a request's headers must arrive within [`ServerOptions::header_read_timeout`]
//! (slowloris), a connection lives at most [`ServerOptions::connection_timeout`], one request per
//! connection (no keep-alive), request heads of at most 16 KiB, at most
//! [`ServerOptions::max_per_peer`] connections from one address (an IPv6 address by its /64;
//! one more is closed at once, so that one client holding idle connections cannot keep the
//! CA's validator out), and at most [`ServerOptions::max_connections`] connections at a time.
//! When that cap is reached the server stops accepting: further connections wait in the
//! kernel's listen queue and are served, in order, as soon as a slot frees (a CA's validator
//! then sees a slow answer rather than a reset).
//!
//! Binding a port below 1024 needs privileges: bind first (as root), drop privileges, then hand
//! the bound socket to [`StandaloneServer::from_listener`] or
//! [`StandaloneServer::from_listener_dir`] (`cert-agent serve` does this).

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use super::{DcvError, ValidationFile};
use crate::http_serve::{self, Limits, OverCap};

/// The name of the server in log messages.
const NAME: &str = "standalone DCV server";

/// Limits of the standalone server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Time a client has to send a complete request head.
    pub header_read_timeout: Duration,
    /// Longest life of a connection, whatever it does.
    pub connection_timeout: Duration,
    /// Connections served at the same time; more wait in the listen queue.
    pub max_connections: usize,
    /// Connections from one address at the same time (0: no cap of its own); one more is
    /// closed at once.
    pub max_per_peer: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            // A validator sends its request at once; a client that does not is let go soon.
            header_read_timeout: Duration::from_secs(3),
            connection_timeout: Duration::from_secs(30),
            max_connections: 64,
            max_per_peer: 8,
        }
    }
}

/// URL path → content of the files being served.
type Files = Arc<RwLock<HashMap<String, Bytes>>>;

/// Where the served files come from.
#[derive(Debug, Clone)]
enum Source {
    /// The in-memory set of [`StandaloneServer::add_file`].
    Memory(Files),
    /// The validation files of an open directory, read on each request.
    Dir(Arc<OwnedFd>),
}

impl Source {
    /// The content served at the URL path `path`, if any.
    fn lookup(&self, path: &str) -> Option<Bytes> {
        match self {
            Self::Memory(files) => files
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(path)
                .cloned(),
            Self::Dir(dir) => {
                let (well_known, name) = super::WellKnown::ALL.into_iter().find_map(|w| {
                    let name = path.strip_prefix(w.url_dir())?.strip_prefix('/')?;
                    Some((w, name))
                })?;
                match read_from_dir(dir, well_known, name) {
                    Ok(content) => content,
                    Err(e) => {
                        tracing::warn!(
                            "standalone DCV server: could not read {}: {e}",
                            crate::values::text::quote(name)
                        );
                        None
                    }
                }
            }
        }
    }
}

/// Reads the validation file `name` of the URL directory `well_known` from the directory
/// `dir`: `None` when `name` is not a validation file name of that directory, there is no such
/// file, it is a symbolic link or not a regular file, or its content is not a valid validation
/// file.
fn read_from_dir(
    dir: &OwnedFd,
    well_known: super::WellKnown,
    name: &str,
) -> std::io::Result<Option<Bytes>> {
    use nix::errno::Errno;
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;

    if !well_known.accepts_name(name) {
        return Ok(None);
    }
    // O_NONBLOCK: a FIFO planted in the directory must not hang the server.
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
    let fd = match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        // ELOOP: a symbolic link (O_NOFOLLOW).
        Err(Errno::ENOENT | Errno::ELOOP) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut file = std::fs::File::from(fd);
    let meta = file.metadata()?;
    if !meta.file_type().is_file() || meta.len() > super::MAX_CONTENT_BYTES as u64 {
        return Ok(None);
    }
    let mut content = String::new();
    // One byte more than allowed: a file that grew after the size check is refused too.
    match file
        .by_ref()
        .take(super::MAX_CONTENT_BYTES as u64 + 1)
        .read_to_string(&mut content)
    {
        Ok(_) => {}
        // Not UTF-8: not a validation file.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return Ok(None),
        Err(e) => return Err(e),
    }
    Ok(ValidationFile::from_parts(name, &content)
        .ok()
        .map(|f| Bytes::copy_from_slice(f.content().as_bytes())))
}

/// A running standalone DCV server. Dropping it stops the server too; [`shutdown`] waits
/// for the stop.
///
/// [`shutdown`]: StandaloneServer::shutdown
#[derive(Debug)]
pub struct StandaloneServer {
    files: Files,
    server: http_serve::Server,
}

impl StandaloneServer {
    /// Binds `listen_addr` and starts serving (no files yet) with default limits.
    pub async fn start(listen_addr: SocketAddr) -> Result<Self, DcvError> {
        Self::start_with(listen_addr, ServerOptions::default()).await
    }

    /// Binds `listen_addr` and starts serving with `options`.
    pub async fn start_with(
        listen_addr: SocketAddr,
        options: ServerOptions,
    ) -> Result<Self, DcvError> {
        let listener = TcpListener::bind(listen_addr)
            .await
            .map_err(|source| DcvError::Listen {
                addr: listen_addr,
                source,
            })?;
        Self::serve(listener, options, listen_addr, None)
    }

    /// Serves on a socket bound elsewhere, e.g. as root before privileges are dropped: the
    /// seam for ports below 1024. Must be called from within a Tokio runtime (an error
    /// otherwise).
    pub fn from_listener(
        listener: std::net::TcpListener,
        options: ServerOptions,
    ) -> Result<Self, DcvError> {
        Self::adopt(listener, options, None)
    }

    /// Serves on a socket bound elsewhere the validation files of the open directory `dir`
    /// (see the module documentation): what the directory holds at the time of a request is
    /// what is served. [`add_file`](Self::add_file) and its kind have no effect on such a
    /// server. Must be called from within a Tokio runtime (an error otherwise).
    pub fn from_listener_dir(
        listener: std::net::TcpListener,
        options: ServerOptions,
        dir: Arc<OwnedFd>,
    ) -> Result<Self, DcvError> {
        Self::adopt(listener, options, Some(dir))
    }

    fn adopt(
        listener: std::net::TcpListener,
        options: ServerOptions,
        dir: Option<Arc<OwnedFd>>,
    ) -> Result<Self, DcvError> {
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        // Registering the socket needs the runtime's reactor.
        tokio::runtime::Handle::try_current().map_err(|e| DcvError::Listen {
            addr,
            source: std::io::Error::other(e),
        })?;
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
            .map_err(|source| DcvError::Listen { addr, source })?;
        Self::serve(listener, options, addr, dir)
    }

    fn serve(
        listener: TcpListener,
        options: ServerOptions,
        addr: SocketAddr,
        dir: Option<Arc<OwnedFd>>,
    ) -> Result<Self, DcvError> {
        let files: Files = Arc::default();
        let source = match dir {
            Some(dir) => Source::Dir(dir),
            None => Source::Memory(files.clone()),
        };
        let limits = Limits {
            header_read_timeout: options.header_read_timeout,
            connection_timeout: options.connection_timeout,
            max_connections: options.max_connections,
            over_cap: OverCap::Wait,
            max_per_peer: options.max_per_peer,
        };
        let handler = move |req: &Request<Incoming>, peer: SocketAddr| respond(&source, req, peer);
        let server = http_serve::Server::start(listener, limits, NAME, Arc::new(handler))
            .map_err(|source| DcvError::Listen { addr, source })?;
        tracing::debug!("standalone DCV server listening on {}", server.local_addr());
        Ok(Self { files, server })
    }

    /// The address the server listens on (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Serves exactly `files` from now on (replacing the previous set).
    pub fn set_files<'a>(&self, files: impl IntoIterator<Item = &'a ValidationFile>) {
        let new: HashMap<String, Bytes> = files
            .into_iter()
            .map(|f| (f.url_path(), Bytes::copy_from_slice(f.content().as_bytes())))
            .collect();
        *self.files.write().unwrap_or_else(PoisonError::into_inner) = new;
    }

    /// Adds (or replaces) one file.
    pub fn add_file(&self, file: &ValidationFile) {
        self.files
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                file.url_path(),
                Bytes::copy_from_slice(file.content().as_bytes()),
            );
    }

    /// Stops serving the file named `name` (`<MD5>.txt` or an ACME token).
    pub fn remove_file(&self, name: &str) {
        let Some(well_known) = super::WellKnown::of_file_name(name) else {
            return;
        };
        let path = format!("{}/{name}", well_known.url_dir());
        self.files
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&path);
    }

    /// The URL paths being served, sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self
            .files
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        paths.sort();
        paths
    }

    /// Stops accepting, closes every connection and waits until the server is gone.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

fn respond(files: &Source, req: &Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
    let method = req.method();
    let path = req.uri().path();
    let found = if method == Method::GET || method == Method::HEAD {
        files.lookup(path)
    } else {
        None
    };
    tracing::debug!(
        "standalone DCV server: {peer} {method} {} -> {}",
        crate::values::text::quote(path),
        if found.is_some() { 200 } else { 404 }
    );
    let (status, content) = match found {
        Some(content) => (StatusCode::OK, content),
        None => (StatusCode::NOT_FOUND, Bytes::from_static(b"not found\n")),
    };
    let len = content.len();
    let body = if method == Method::HEAD {
        Bytes::new()
    } else {
        content
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
