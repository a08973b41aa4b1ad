//! This project's additions to the API, for the web UI (README, Web UI): what PROTOCOL.md
//! §8 has no route for. Each needs the `read_servers` permission.
//!
//! - `GET /system/logs?after=<seq>&limit=<n>`: `{"lines": [{"seq", "line"}], "next"}`, the
//!   server log lines after `seq` (oldest first, at most `n`, default 500), and the `after`
//!   to ask next;
//! - `GET /system/config`: `{"toml": "…"}`, the effective configuration, secrets redacted;
//! - `GET /streams/{s}/topics/{t}/consumer-groups/{g}/lag`: `{"group_id", "name",
//!   "members", "partitions": [{"partition_id", "current_offset", "messages_count",
//!   "stored_offset", "lag"}], "lag"}`.
//!
//! A group's lag in a partition is the messages after its stored offset (all of them when it
//! stored none): what its members have yet to read.

use proto::codes::CommandCode;
use proto::commands::groups::{ConsumerGroupDetails, GetConsumerGroup};
use proto::commands::offsets::{ConsumerOffset, GetConsumerOffset, OffsetSelector};
use proto::commands::system::GetClient;
use proto::commands::topics::{GetTopic, TopicDetails};
use proto::primitives::{Consumer, ConsumerKind, OptionalPartition};
use serde_json::{Value, json};
use transport::ConnectionHandler;

use crate::api::Call;
use crate::error::ApiError;
use crate::route::{Id, Route};
use crate::session::encode;
use crate::wire::Response;

/// Log lines a request may ask for at most.
const LOG_LINES_MAX: usize = 2_000;

/// What the server knows outside the protocol: its log and its configuration.
pub trait Console {
    /// Log lines numbered above `after`, oldest first, at most `limit`.
    fn log_lines(&self, after: u64, limit: usize) -> Vec<LogLine>;
    /// The number of the newest line (0 before any).
    fn last_log_seq(&self) -> u64;
    /// The effective configuration as TOML, every secret redacted.
    fn effective_config(&self) -> String;
}

/// One line of the server log, numbered from 1 in the order it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub seq: u64,
    pub text: String,
}

/// A console with nothing to tell (a server that keeps no log lines).
#[derive(Debug, Default)]
pub struct NoConsole;

impl Console for NoConsole {
    fn log_lines(&self, _after: u64, _limit: usize) -> Vec<LogLine> {
        Vec::new()
    }

    fn last_log_seq(&self) -> u64 {
        0
    }

    fn effective_config(&self) -> String {
        String::new()
    }
}

impl<H: ConnectionHandler> Call<'_, H> {
    /// Refuses the request unless its credential may `read_servers`.
    async fn require_read_servers(&self) -> Result<(), ApiError> {
        // GET_CLIENT needs `read_servers` and costs one lookup; its answer is not used.
        let probe = encode(&GetClient { client_id: 0 });
        self.session.call(CommandCode::GetClient, &probe).await?;
        Ok(())
    }

    /// The console routes.
    pub(crate) async fn console(&self, route: Route) -> Result<Response, ApiError> {
        self.require_read_servers().await?;
        match route {
            Route::Logs => {
                let after = self.query_number("after")?.unwrap_or(0);
                // A number past the newest line was this server's before a restart (a page
                // kept open, its token still valid): the numbering began again at 1.
                let after = if after > self.api.console.last_log_seq() {
                    0
                } else {
                    after
                };
                let limit = self
                    .query_number("limit")?
                    .map_or(500, |limit: u64| {
                        usize::try_from(limit).unwrap_or(usize::MAX)
                    })
                    .min(LOG_LINES_MAX);
                let lines = self.api.console.log_lines(after, limit);
                let next = lines.last().map_or(after, |line| line.seq);
                let lines: Vec<Value> = lines
                    .iter()
                    .map(|line| json!({"seq": line.seq, "line": line.text}))
                    .collect();
                Ok(crate::api::ok(&json!({"lines": lines, "next": next})))
            }
            Route::Config => {
                let toml = self.api.console.effective_config();
                Ok(crate::api::ok(&json!({ "toml": toml })))
            }
            Route::GroupLag(stream_id, topic_id, group_id) => {
                self.group_lag(stream_id, topic_id, group_id).await
            }
            _ => Err(ApiError::NoRoute),
        }
    }

    fn query_number(&self, key: &'static str) -> Result<Option<u64>, ApiError> {
        self.target
            .query(key)
            .map(|value| {
                value
                    .parse()
                    .map_err(|_not_number| ApiError::invalid(format!("{key} is a number"), key))
            })
            .transpose()
    }

    async fn group_lag(
        &self,
        stream_id: Id,
        topic_id: Id,
        group_id: Id,
    ) -> Result<Response, ApiError> {
        let request = GetConsumerGroup {
            stream_id: stream_id.clone(),
            topic_id: topic_id.clone(),
            group_id: group_id.clone(),
        };
        let group: Option<ConsumerGroupDetails> =
            self.get(CommandCode::GetConsumerGroup, &request).await?;
        let group = group.ok_or(ApiError::NotFound)?;
        let request = GetTopic {
            stream_id: stream_id.clone(),
            topic_id: topic_id.clone(),
        };
        let topic: Option<TopicDetails> = self.get(CommandCode::GetTopic, &request).await?;
        let topic = topic.ok_or(ApiError::NotFound)?;
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        let mut total = 0_u64;
        for partition in &topic.partitions {
            let selector = OffsetSelector {
                consumer: Consumer {
                    kind: ConsumerKind::ConsumerGroup,
                    id: proto::primitives::Identifier::Numeric(group.group.id),
                },
                stream_id: stream_id.clone(),
                topic_id: topic_id.clone(),
                partition: OptionalPartition(Some(partition.id)),
            };
            let stored: Option<ConsumerOffset> = self
                .get(
                    CommandCode::GetConsumerOffset,
                    &GetConsumerOffset { selector },
                )
                .await?;
            let stored = stored.map(|offset| offset.stored_offset);
            let lag = lag(partition.current_offset, partition.messages_count, stored);
            total = total.saturating_add(lag);
            partitions.push(json!({
                "partition_id": partition.id,
                "current_offset": partition.current_offset,
                "messages_count": partition.messages_count,
                "stored_offset": stored,
                "lag": lag,
            }));
        }
        let members: Vec<Value> = group
            .members
            .iter()
            .map(|member| json!({"id": member.id, "partitions": member.partition_ids}))
            .collect();
        Ok(crate::api::ok(&json!({
            "group_id": group.group.id,
            "name": group.group.name.as_str(),
            "members": members,
            "partitions": partitions,
            "lag": total,
        })))
    }
}

/// Messages after `stored` up to the partition's last offset `current`; all `messages`
/// when nothing was stored. Never more than the partition holds: messages retention removed
/// after the stored offset can no longer be read.
fn lag(current: u64, messages: u64, stored: Option<u64>) -> u64 {
    stored.map_or(messages, |stored| {
        current.saturating_sub(stored).min(messages)
    })
}

#[cfg(test)]
mod tests {
    use super::lag;

    #[test]
    fn lag_counts_what_is_after_the_stored_offset() {
        assert_eq!(lag(0, 0, None), 0);
        assert_eq!(lag(9, 10, None), 10);
        assert_eq!(lag(9, 10, Some(9)), 0);
        assert_eq!(lag(9, 10, Some(4)), 5);
        // A stored offset past the head (a purge since) is no lag, not an underflow.
        assert_eq!(lag(3, 4, Some(7)), 0);
        // Retention removed offsets 0..=89 of 100: 10 messages are left to read.
        assert_eq!(lag(99, 10, Some(5)), 10);
    }
}
