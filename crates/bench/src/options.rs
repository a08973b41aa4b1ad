//! The command line of `iggy bench`: a scenario name and `--flag value` options.

use std::net::SocketAddr;
use std::path::PathBuf;

use proto::Dialect;

use crate::client::{Client, ClientError, Durability, Login};
use crate::link::Transport;

pub const USAGE: &str = "\
usage: iggy bench <scenario> [options]

scenarios (the names iggy-bench uses):
  pinned-producer                 each producer sends to partition 0 of its own stream
  pinned-consumer                 each consumer polls partition 0 of its own stream
  pinned-producer-and-consumer    both at once, on the same streams
  balanced-producer               producers spread batches over the topic's partitions
  balanced-consumer-group         consumers of one group poll the partitions assigned them
  end-to-end-producing-consumer   each actor sends a batch, then polls it back

options:
  --producers N            producers (default 1)
  --consumers N            consumers (default 1)
  --streams N              streams (default: one per actor for pinned scenarios, else 1)
  --partitions N           partitions per topic (default 1)
  --message-size BYTES     payload bytes per message (default 1000)
  --messages-per-batch N   messages per batch (default 1000)
  --batches N              batches per actor (default 1000)
  --total-bytes SIZE       payload bytes over all actors, instead of --batches (e.g. 1GiB)
  --rate-limit SIZE        payload bytes per second per actor (default: unlimited)
  --durability KIND        replicated | persisted: the topics' durability (default replicated)
  --idle-connections N     also hold N logged-in, silent connections open through the run
                           (the server's memory per connection is reported)
  --dialect D              auto | 0.12.2 | 0.11.0: the protocol dialect; auto tries 0.12.2 and
                           falls back to 0.11.0 (what Apache Iggy 0.9.0-edge servers speak)
  --address HOST:PORT      server address (default 127.0.0.1:8090)
  --transport NAME         tcp (default), tcp-tls, ws, wss, quic, http or https; --address
                           names that transport's listener (TLS accepts any certificate;
                           http sends each request as the HTTP API's JSON)
  --username NAME          (default iggy)
  --password SECRET        (default iggy)
  --output DIR             where the JSON and SVG charts go (default bench-output)
  --calibrate              also measure loopback TCP and the disk with the same sizes
  --calibrate-dir DIR      directory for the disk measurement (default: --output)
  -h, --help               print this help

SIZE takes B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).";

/// What the benchmark does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    PinnedProducer,
    PinnedConsumer,
    PinnedProducerAndConsumer,
    BalancedProducer,
    BalancedConsumerGroup,
    EndToEndProducingConsumer,
}

impl Scenario {
    pub const ALL: [Self; 6] = [
        Self::PinnedProducer,
        Self::PinnedConsumer,
        Self::PinnedProducerAndConsumer,
        Self::BalancedProducer,
        Self::BalancedConsumerGroup,
        Self::EndToEndProducingConsumer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::PinnedProducer => "pinned-producer",
            Self::PinnedConsumer => "pinned-consumer",
            Self::PinnedProducerAndConsumer => "pinned-producer-and-consumer",
            Self::BalancedProducer => "balanced-producer",
            Self::BalancedConsumerGroup => "balanced-consumer-group",
            Self::EndToEndProducingConsumer => "end-to-end-producing-consumer",
        }
    }

    pub fn has_producers(self) -> bool {
        !matches!(self, Self::PinnedConsumer | Self::BalancedConsumerGroup)
    }

    pub fn has_consumers(self) -> bool {
        matches!(
            self,
            Self::PinnedConsumer | Self::PinnedProducerAndConsumer | Self::BalancedConsumerGroup
        )
    }

    fn is_pinned(self) -> bool {
        matches!(
            self,
            Self::PinnedProducer
                | Self::PinnedConsumer
                | Self::PinnedProducerAndConsumer
                | Self::EndToEndProducingConsumer
        )
    }
}

/// The parsed options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub scenario: Scenario,
    pub producers: u32,
    pub consumers: u32,
    pub streams: u32,
    pub partitions: u32,
    pub message_size_bytes: u32,
    pub messages_per_batch: u32,
    /// Batches each actor sends or reads.
    pub batches: u64,
    pub rate_limit_bytes_per_second: Option<u64>,
    pub durability: Durability,
    /// Logged-in connections held open, silent, through the run.
    pub idle_connections: u32,
    /// The protocol dialect; `None` = negotiate (0.12.2, else 0.11.0).
    pub dialect: Option<Dialect>,
    pub address: SocketAddr,
    /// The transport `address` serves.
    pub transport: Transport,
    pub username: String,
    pub password: String,
    pub output: PathBuf,
    pub calibrate: bool,
    pub calibrate_dir: Option<PathBuf>,
}

/// A bad command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    #[error("name a scenario: one of {names}", names = scenario_names())]
    MissingScenario,
    #[error("unknown scenario `{0}`: one of {names}", names = scenario_names())]
    UnknownScenario(String),
    #[error("unknown option `{0}`")]
    Unknown(String),
    #[error("`{0}` needs a value")]
    MissingValue(String),
    #[error("`{flag}`: `{value}` is not valid")]
    Invalid { flag: String, value: String },
    #[error("help requested")]
    Help,
}

/// Flags as given before the per-actor batch count is resolved.
struct Raw {
    options: Options,
    streams: Option<u32>,
    total_bytes: Option<u64>,
}

impl Options {
    pub fn parse(arguments: impl IntoIterator<Item = String>) -> Result<Self, OptionsError> {
        let mut arguments = arguments.into_iter();
        let first = arguments.next().ok_or(OptionsError::MissingScenario)?;
        if first == "-h" || first == "--help" || first == "help" {
            return Err(OptionsError::Help);
        }
        let scenario = Scenario::ALL
            .into_iter()
            .find(|scenario| scenario.name() == first)
            .ok_or(OptionsError::UnknownScenario(first))?;
        let mut raw = Raw {
            options: Self::defaults(scenario),
            streams: None,
            total_bytes: None,
        };
        while let Some(argument) = arguments.next() {
            let (flag, inline) = match argument.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
                None => (argument, None),
            };
            if flag == "--calibrate" {
                raw.options.calibrate = true;
                continue;
            }
            if flag == "-h" || flag == "--help" {
                return Err(OptionsError::Help);
            }
            let value = inline
                .or_else(|| arguments.next())
                .ok_or_else(|| OptionsError::MissingValue(flag.clone()))?;
            raw.apply(&flag, &value)?;
        }
        Ok(raw.resolve())
    }

    fn defaults(scenario: Scenario) -> Self {
        Self {
            scenario,
            producers: 1,
            consumers: 1,
            streams: 1,
            partitions: 1,
            message_size_bytes: 1000,
            messages_per_batch: 1000,
            batches: 1000,
            rate_limit_bytes_per_second: None,
            durability: Durability::Replicated,
            idle_connections: 0,
            dialect: None,
            address: SocketAddr::from(([127, 0, 0, 1], 8090)),
            transport: Transport::Tcp,
            username: "iggy".into(),
            password: "iggy".into(),
            output: PathBuf::from("bench-output"),
            calibrate: false,
            calibrate_dir: None,
        }
    }

    /// The login every connection of the run makes.
    pub fn login(&self) -> Login<'_> {
        Login {
            address: self.address,
            transport: self.transport,
            username: &self.username,
            password: &self.password,
        }
    }

    /// Connects as client `client_id` in the chosen dialect, or negotiates one.
    pub fn connect(&self, client_id: u128) -> Result<Client, ClientError> {
        match self.dialect {
            Some(dialect) => Client::connect(&self.login(), dialect, client_id),
            None => Client::negotiate(&self.login(), client_id),
        }
    }

    /// Payload bytes of one batch.
    pub fn batch_payload_bytes(&self) -> u64 {
        u64::from(self.message_size_bytes) * u64::from(self.messages_per_batch)
    }

    /// Actors that send (producers, or the producing consumers of end-to-end).
    pub fn producing_actors(&self) -> u32 {
        if self.scenario.has_producers() {
            self.producers
        } else {
            0
        }
    }

    pub fn consuming_actors(&self) -> u32 {
        if self.scenario.has_consumers() {
            self.consumers
        } else {
            0
        }
    }
}

impl Raw {
    fn apply(&mut self, flag: &str, value: &str) -> Result<(), OptionsError> {
        let invalid = || OptionsError::Invalid {
            flag: flag.to_owned(),
            value: value.to_owned(),
        };
        let count = || {
            value
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(invalid)
        };
        let options = &mut self.options;
        match flag {
            "--producers" => options.producers = count()?,
            "--consumers" => options.consumers = count()?,
            "--streams" => self.streams = Some(count()?),
            "--partitions" => options.partitions = count()?,
            "--message-size" => options.message_size_bytes = count()?,
            "--messages-per-batch" => options.messages_per_batch = count()?,
            "--batches" => {
                options.batches = value.parse().ok().filter(|n| *n > 0).ok_or_else(invalid)?;
            }
            "--total-bytes" => self.total_bytes = Some(parse_size(value).ok_or_else(invalid)?),
            "--rate-limit" => {
                options.rate_limit_bytes_per_second = Some(parse_size(value).ok_or_else(invalid)?);
            }
            "--durability" => {
                options.durability = match value {
                    "replicated" => Durability::Replicated,
                    "persisted" => Durability::Persisted,
                    _ => return Err(invalid()),
                };
            }
            "--idle-connections" => {
                options.idle_connections = value.parse().map_err(|_error| invalid())?;
            }
            "--dialect" => {
                options.dialect = match value {
                    "auto" => None,
                    "0.12.2" => Some(Dialect::V0_12_2),
                    "0.11.0" => Some(Dialect::V0_11_0),
                    _ => return Err(invalid()),
                };
            }
            "--address" => options.address = value.parse().map_err(|_error| invalid())?,
            "--transport" => options.transport = Transport::parse(value).ok_or_else(invalid)?,
            "--username" => value.clone_into(&mut options.username),
            "--password" => value.clone_into(&mut options.password),
            "--output" => options.output = PathBuf::from(value),
            "--calibrate-dir" => options.calibrate_dir = Some(PathBuf::from(value)),
            _ => return Err(OptionsError::Unknown(flag.to_owned())),
        }
        Ok(())
    }

    /// Streams default to one per actor when pinned; `--total-bytes` becomes batches per actor.
    fn resolve(self) -> Options {
        let mut options = self.options;
        let actors = options
            .producing_actors()
            .max(options.consuming_actors())
            .max(1);
        options.streams = self.streams.unwrap_or(if options.scenario.is_pinned() {
            actors
        } else {
            1
        });
        if let Some(total) = self.total_bytes {
            let per_batch = options.batch_payload_bytes() * u64::from(actors);
            options.batches = total.div_ceil(per_batch).max(1);
        }
        options
    }
}

/// `1GiB`, `512MB`, `100KB`, `4096`.
pub fn parse_size(text: &str) -> Option<u64> {
    proto::units::parse_byte_size(text)
}

fn scenario_names() -> String {
    let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use proto::Dialect;

    use super::{Options, OptionsError, Scenario, parse_size};
    use crate::client::Durability;

    fn parse(arguments: &[&str]) -> Result<Options, OptionsError> {
        Options::parse(arguments.iter().map(|a| (*a).to_owned()))
    }

    /// `iggy bench help` (what the README shows) is help, as `-h` and `--help` are, before
    /// a scenario or after one.
    #[test]
    fn help() {
        for arguments in [
            &["help"][..],
            &["-h"],
            &["--help"],
            &["pinned-producer", "--help"],
        ] {
            assert!(
                matches!(parse(arguments), Err(OptionsError::Help)),
                "{arguments:?}"
            );
        }
    }

    #[test]
    fn transports() {
        let options = parse(&["pinned-producer", "--transport", "quic"]).unwrap();
        assert_eq!(options.transport, crate::link::Transport::Quic);
        for name in ["tcp", "tcp-tls", "ws", "wss", "quic"] {
            let transport = crate::link::Transport::parse(name).unwrap();
            assert_eq!(transport.name(), name);
        }
        assert!(parse(&["pinned-producer", "--transport", "carrier-pigeon"]).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("100KB"), Some(100_000));
        assert_eq!(parse_size("7"), Some(7));
        assert_eq!(parse_size("3 parsecs"), None);
    }

    #[test]
    fn options() {
        let options = parse(&[
            "pinned-producer",
            "--producers=4",
            "--total-bytes",
            "4GB",
            "--durability",
            "persisted",
        ])
        .unwrap();
        assert_eq!(options.scenario, Scenario::PinnedProducer);
        assert_eq!(options.streams, 4);
        assert_eq!(options.batches, 1000);
        assert_eq!(options.durability, Durability::Persisted);
        let balanced = parse(&["balanced-producer", "--producers", "8"]).unwrap();
        assert_eq!(balanced.streams, 1);
        assert_eq!(parse(&[]), Err(OptionsError::MissingScenario));
        assert!(matches!(
            parse(&["pinned"]),
            Err(OptionsError::UnknownScenario(_))
        ));
        assert!(matches!(
            parse(&["pinned-consumer", "--batches", "0"]),
            Err(OptionsError::Invalid { .. })
        ));
    }

    #[test]
    fn dialects() {
        let dialect = |value: &str| parse(&["pinned-producer", "--dialect", value]);
        assert_eq!(parse(&["pinned-producer"]).unwrap().dialect, None);
        assert_eq!(dialect("auto").unwrap().dialect, None);
        assert_eq!(dialect("0.11.0").unwrap().dialect, Some(Dialect::V0_11_0));
        assert_eq!(dialect("0.12.2").unwrap().dialect, Some(Dialect::V0_12_2));
        assert!(matches!(
            dialect("0.10.0"),
            Err(OptionsError::Invalid { .. })
        ));
    }
}
