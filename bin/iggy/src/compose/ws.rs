//! WebSocket on the shards: plain connections are handed to every shard at accept (as
//! Iggy does), WSS is served on the leader (see `transport::ws::handoff`).

use std::future::Future;
use std::rc::Rc;

use shard::Server;
use transport::ws::handoff::{WsCount, WsHandoff, WsInbox, WsShard, handoff_channel};
use transport::ws::{WsConfig, WsServer};

/// The leader's ends of the WebSocket hand-off channels, one per other shard.
#[derive(Default)]
pub(super) struct WsHandoffs {
    others: Vec<WsHandoff>,
    count: WsCount,
}

/// What one other shard serves of WebSocket: the connections handed to it, if any.
#[derive(Default)]
pub(super) struct WsHanded {
    inbox: Option<(WsInbox, WsConfig)>,
    count: WsCount,
}

/// Channels for `others` shards besides the leader when `ws` is a plain listener; none
/// for WSS or without a listener.
pub(super) fn channels(ws: Option<&WsServer>, others: usize) -> (WsHandoffs, Vec<WsHanded>) {
    let count = WsCount::default();
    let Some(ws) = ws.filter(|ws| !ws.is_tls()) else {
        let handed = (0..others).map(|_| WsHanded::default()).collect();
        return (WsHandoffs::default(), handed);
    };
    let (senders, handed): (Vec<_>, Vec<_>) = (0..others)
        .map(|_| {
            let (sender, inbox) = handoff_channel();
            let handed = WsHanded {
                inbox: Some((inbox, ws.config())),
                count: std::sync::Arc::clone(&count),
            };
            (sender, handed)
        })
        .unzip();
    let handoffs = WsHandoffs {
        others: senders,
        count,
    };
    (handoffs, handed)
}

/// Serves WebSocket (or WSS) from the leader until `shutdown` completes.
pub(super) async fn serve_leader(
    ws: Option<WsServer>,
    server: Rc<Server>,
    handoffs: WsHandoffs,
    shutdown: impl Future<Output = ()>,
) {
    let Some(ws) = ws else {
        return;
    };
    let shards = handoffs.others.len() + 1;
    if ws.is_tls() {
        log::info!(
            "websocket: listening on {} with TLS (shard 0)",
            ws.local_address()
        );
    } else {
        log::info!(
            "websocket: listening on {} ({shards} shard(s))",
            ws.local_address()
        );
    }
    let handler = super::transport_handler(server, shard::TransportKind::WebSocket);
    let local = WsShard::new(ws.config(), handler, handoffs.count);
    ws.serve_sharded(&local, handoffs.others, shutdown).await;
}

/// Serves the WebSocket connections handed to this shard until the leader says stop.
pub(super) async fn serve_handed(handed: WsHanded, server: Rc<Server>) {
    let Some((inbox, config)) = handed.inbox else {
        return;
    };
    let handler = super::transport_handler(server, shard::TransportKind::WebSocket);
    WsShard::new(config, handler, handed.count)
        .receive(inbox)
        .await;
}
