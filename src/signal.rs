//! Process signals, one mechanism for every mode: the stop signals (`SIGTERM` and `SIGINT`,
//! which end a run, `serve` and the daemon cleanly) and `SIGHUP` (the daemon reads its
//! configuration again). Depends on nothing of ours.

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

/// A signal handler could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("could not install the {name} handler: {source}")]
pub(crate) struct SignalError {
    name: &'static str,
    source: std::io::Error,
}

fn install(kind: SignalKind, name: &'static str) -> Result<Signal, SignalError> {
    signal(kind).map_err(|source| SignalError { name, source })
}

/// `SIGTERM` and `SIGINT`, handled from now on (they no longer end the process by default).
#[derive(Debug)]
pub(crate) struct StopSignals {
    term: Signal,
    int: Signal,
}

impl StopSignals {
    /// Installs the handlers.
    pub(crate) fn install() -> Result<Self, SignalError> {
        Ok(Self {
            term: install(SignalKind::terminate(), "SIGTERM")?,
            int: install(SignalKind::interrupt(), "SIGINT")?,
        })
    }

    /// Resolves at the next `SIGTERM` or `SIGINT`.
    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    /// A channel that turns `true` at the first stop signal (after `on_first`); at the second,
    /// `on_second` runs (typically ending the process at once). `None` when the handlers
    /// cannot be installed: the signals then keep their default action.
    pub(crate) fn channel(
        on_first: impl FnOnce() + Send + 'static,
        on_second: impl FnOnce() + Send + 'static,
    ) -> Option<watch::Receiver<bool>> {
        let mut signals = match Self::install() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("{e}");
                return None;
            }
        };
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            signals.recv().await;
            on_first();
            let _ = tx.send(true);
            signals.recv().await;
            on_second();
        });
        Some(rx)
    }
}

/// `SIGHUP`, handled from now on.
#[derive(Debug)]
pub(crate) struct Hangups(Signal);

impl Hangups {
    /// Installs the handler.
    pub(crate) fn install() -> Result<Self, SignalError> {
        install(SignalKind::hangup(), "SIGHUP").map(Self)
    }

    /// Resolves at the next `SIGHUP` (`None` when no more can arrive).
    pub(crate) async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}
