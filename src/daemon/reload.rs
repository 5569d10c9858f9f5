//! A config reload, from SIGHUP, the control socket or a changed file: the
//! new config replaces the old only when it loads whole; what changed (or
//! why it was refused) is logged and kept for `reaperctl status`.

use super::board::unix_now;
use super::pressure::PressureWatch;
use super::run::Daemon;
use crate::config::Config;
use crate::proto::ReloadResult;

impl Daemon {
    pub(super) fn reload_config(&mut self, why: &str) -> ReloadResult {
        self.config.rearm();
        self.notifier.reloading();
        let sources = self.shared.borrow().sources.clone();
        let result = match Config::load(&sources) {
            Ok(new) => {
                let changes = self.shared.borrow().cfg.diff(&new);
                if changes.is_empty() {
                    tracing::debug!("config reloaded ({why}): no changes");
                } else {
                    tracing::info!("config reloaded ({why}): {}", changes.join("; "));
                }
                if self.shared.borrow().cfg.metrics_listen != new.metrics_listen {
                    tracing::warn!("metrics.listen changed: the HTTP server keeps its address until a restart");
                }
                crate::redact::install(new.redactor.clone());
                if self.pressure.differs(&new.pressure) {
                    self.pressure = PressureWatch::started(&new.pressure);
                    self.shared.borrow_mut().pressure = self.pressure.status();
                }
                self.shared.borrow_mut().cfg = new;
                ReloadResult { at_unix: unix_now(), ok: true, messages: changes }
            }
            Err(errs) => {
                for e in &errs.0 {
                    tracing::error!(
                        reaper_action = "error",
                        "config reload ({why}) failed, keeping the previous config: {e}"
                    );
                }
                ReloadResult {
                    at_unix: unix_now(),
                    ok: false,
                    messages: errs.0.iter().map(std::string::ToString::to_string).collect(),
                }
            }
        };
        self.shared.borrow_mut().last_reload = Some(result.clone());
        let line = self.shared.borrow().status_line();
        self.notifier.ready(&line);
        result
    }
}
