//! `[system.logging]` and `[telemetry]` with Iggy's keys.

use std::path::PathBuf;
use std::time::Duration;

use super::{ConfigError, View};

/// `[system.logging]`: the filter, and the log files under `system.path`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoggingSettings {
    /// `RUST_LOG` syntax (`info`, `warn,shard=debug`); `RUST_LOG` itself wins over it.
    pub(crate) level: String,
    pub(crate) file_enabled: bool,
    /// The directory of the log files: `system.path` joined with `system.logging.path`.
    pub(crate) directory: PathBuf,
    /// A file larger than this is rotated (0: never).
    pub(crate) max_file_size: u64,
    /// Rotated files beyond this total are deleted, oldest first (0: no limit).
    pub(crate) max_total_size: u64,
    pub(crate) rotation_check_interval: Duration,
    /// Rotated files older than this are deleted.
    pub(crate) retention: Duration,
}

/// `[telemetry]`: OpenTelemetry logs and traces over OTLP/HTTP.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TelemetrySettings {
    pub(crate) enabled: bool,
    pub(crate) service_name: String,
    pub(crate) logs_endpoint: String,
    pub(crate) traces_endpoint: String,
}

impl View<'_> {
    pub(super) fn logging(
        &self,
        system_path: &std::path::Path,
    ) -> Result<LoggingSettings, ConfigError> {
        let level = self.string("system.logging.level")?;
        if let Err(reason) = crate::logger::filter::Filter::parse(&level) {
            return Err(ConfigError::Invalid {
                key: "system.logging.level".into(),
                reason,
            });
        }
        Ok(LoggingSettings {
            level,
            file_enabled: self.bool("system.logging.file_enabled")?,
            directory: system_path.join(self.string("system.logging.path")?),
            max_file_size: self.size("system.logging.max_file_size")?,
            max_total_size: self.size("system.logging.max_total_size")?,
            rotation_check_interval: self.duration("system.logging.rotation_check_interval")?,
            retention: self.duration("system.logging.retention")?,
        })
    }

    /// Only the `http` transport exists: gRPC would need tokio, which the project does not
    /// run; an enabled `grpc` section stops the start with a message saying so.
    pub(super) fn telemetry(&self) -> Result<TelemetrySettings, ConfigError> {
        let enabled = self.bool("telemetry.enabled")?;
        let mut endpoints = Vec::new();
        for kind in ["logs", "traces"] {
            let transport = self.string(&format!("telemetry.{kind}.transport"))?;
            let key = format!("telemetry.{kind}.transport");
            match transport.as_str() {
                "http" => {}
                "grpc" if !enabled => {}
                "grpc" => {
                    let reason = "the grpc transport is not supported (it needs the tokio \
                                  runtime); use \"http\" with the collector's OTLP/HTTP \
                                  endpoint (port 4318, path /v1/logs or /v1/traces)";
                    return Err(ConfigError::Invalid {
                        key,
                        reason: reason.into(),
                    });
                }
                other => {
                    let reason = format!("`{other}` is not \"http\" or \"grpc\"");
                    return Err(ConfigError::Invalid { key, reason });
                }
            }
            let key = format!("telemetry.{kind}.endpoint");
            let endpoint = self.string(&key)?;
            if enabled && crate::telemetry::Endpoint::parse(&endpoint).is_err() {
                let reason = format!("`{endpoint}` is not an http://host:port/path URL");
                return Err(ConfigError::Invalid { key, reason });
            }
            endpoints.push(endpoint);
        }
        let traces_endpoint = endpoints.pop().unwrap_or_default();
        let logs_endpoint = endpoints.pop().unwrap_or_default();
        Ok(TelemetrySettings {
            enabled,
            service_name: self.string("telemetry.service_name")?,
            logs_endpoint,
            traces_endpoint,
        })
    }
}
