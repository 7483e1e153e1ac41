//! GraphQL subscriptions over one shared WebSocket (`/graphql/ws`, graphql-transport-ws).
//!
//! The console opens a single socket per token and multiplexes every subscription on it by
//! id. The socket authenticates in `connection_init` with the bearer token; subscriptions
//! made before the server's `connection_ack` are sent once it arrives. When the socket drops
//! (server restart, network), it reconnects with backoff and re-subscribes everything still
//! wanted: `jobProgress` starts with the job's current state, so nothing is missed. A close
//! with 4403 (token refused) ends every subscription with an error instead.
//!
//! The state lives in a thread-local (the browser has one thread) so handles are plain ids,
//! `Send + Sync`, and can be cancelled from `on_cleanup`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

const PROTOCOL: &str = "graphql-transport-ws";
/// The close code graphql-transport-ws uses for refused credentials.
const FORBIDDEN: u16 = 4403;

/// What a subscription receives.
#[derive(Debug)]
pub enum SubEvent {
    /// One result: `{ data, errors }` as GraphQL sends it.
    Next(Value),
    /// The subscription (or the connection) failed for good; a readable reason.
    Failed(String),
    /// The server ended the subscription.
    Complete,
}

type Handler = Box<dyn FnMut(SubEvent)>;

struct Sub {
    payload: Value,
    handler: Option<Handler>,
}

struct Client {
    token: String,
    /// Bumped for every new socket: events of an older socket are ignored.
    generation: u64,
    socket: Option<WebSocket>,
    acked: bool,
    subs: HashMap<u64, Sub>,
    next_id: u64,
    retries: u32,
    _on_open: Option<Closure<dyn FnMut()>>,
    _on_message: Option<Closure<dyn FnMut(MessageEvent)>>,
    _on_close: Option<Closure<dyn FnMut(CloseEvent)>>,
}

thread_local! {
    static CLIENT: RefCell<Option<Client>> = const { RefCell::new(None) };
}

/// A live subscription; [`Subscription::cancel`] ends it (idempotent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subscription(u64);

impl Subscription {
    pub fn cancel(self) {
        let socket = CLIENT.with_borrow_mut(|c| {
            let c = c.as_mut()?;
            c.subs.remove(&self.0)?;
            c.acked.then(|| c.socket.clone()).flatten()
        });
        if let Some(socket) = socket {
            send(
                &socket,
                &json!({ "id": self.0.to_string(), "type": "complete" }),
            );
        }
    }
}

/// Starts `query` (a subscription operation) with `variables` as `token`; `handler` gets
/// every event until [`Subscription::cancel`] or the server completes it.
pub fn subscribe(
    token: &str,
    query: &str,
    variables: Value,
    handler: impl FnMut(SubEvent) + 'static,
) -> Subscription {
    let payload = json!({ "query": query, "variables": variables });
    let (id, ready_socket, connect) = CLIENT.with_borrow_mut(|slot| {
        if slot.as_ref().is_some_and(|c| c.token != token) {
            // Another user signed in: the old socket (and its subscriptions) go.
            if let Some(old) = slot.take() {
                if let Some(s) = old.socket {
                    let _ = s.close();
                }
            }
        }
        let c = slot.get_or_insert_with(|| Client {
            token: token.to_owned(),
            generation: 0,
            socket: None,
            acked: false,
            subs: HashMap::new(),
            next_id: 1,
            retries: 0,
            _on_open: None,
            _on_message: None,
            _on_close: None,
        });
        let id = c.next_id;
        c.next_id += 1;
        c.subs.insert(
            id,
            Sub {
                payload: payload.clone(),
                handler: Some(Box::new(handler)),
            },
        );
        let ready = c.acked.then(|| c.socket.clone()).flatten();
        (id, ready, c.socket.is_none())
    });
    if let Some(socket) = ready_socket {
        send(
            &socket,
            &json!({ "id": id.to_string(), "type": "subscribe", "payload": payload }),
        );
    } else if connect {
        open_socket();
    }
    Subscription(id)
}

fn ws_url() -> Option<String> {
    let location = web_sys::window()?.location();
    let scheme = if location.protocol().ok()? == "https:" {
        "wss"
    } else {
        "ws"
    };
    Some(format!("{scheme}://{}/graphql/ws", location.host().ok()?))
}

fn send(socket: &WebSocket, message: &Value) {
    // A socket closing underneath us: the close handler reconnects and re-subscribes.
    let _ = socket.send_with_str(&message.to_string());
}

fn open_socket() {
    let Some(url) = ws_url() else {
        fail_all("The browser cannot open a WebSocket");
        return;
    };
    let socket = match WebSocket::new_with_str(&url, PROTOCOL) {
        Ok(s) => s,
        Err(_) => {
            fail_all("The browser cannot open a WebSocket");
            return;
        }
    };
    CLIENT.with_borrow_mut(|slot| {
        let Some(c) = slot.as_mut() else { return };
        c.generation += 1;
        let generation = c.generation;
        let token = c.token.clone();
        let open_socket = socket.clone();
        let on_open = Closure::<dyn FnMut()>::new(move || {
            let init = json!({
                "type": "connection_init",
                "payload": { "authorization": format!("Bearer {token}") },
            });
            send(&open_socket, &init);
        });
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Some(text) = ev.data().as_string() {
                on_message(generation, &text);
            }
        });
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |ev: CloseEvent| {
            on_close(generation, ev.code());
        });
        socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        c._on_open = Some(on_open);
        c._on_message = Some(on_message);
        c._on_close = Some(on_close);
        c.socket = Some(socket);
        c.acked = false;
    });
}

fn on_message(generation: u64, text: &str) {
    let Ok(msg) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let kind = msg["type"].as_str().unwrap_or_default();
    match kind {
        "connection_ack" => {
            let pending = CLIENT.with_borrow_mut(|slot| {
                let c = slot.as_mut().filter(|c| c.generation == generation)?;
                c.acked = true;
                c.retries = 0;
                let subs: Vec<(u64, Value)> = c
                    .subs
                    .iter()
                    .map(|(id, s)| (*id, s.payload.clone()))
                    .collect();
                Some((c.socket.clone()?, subs))
            });
            if let Some((socket, subs)) = pending {
                for (id, payload) in subs {
                    send(
                        &socket,
                        &json!({ "id": id.to_string(), "type": "subscribe", "payload": payload }),
                    );
                }
            }
        }
        "ping" => {
            let socket = CLIENT.with_borrow(|slot| {
                slot.as_ref()
                    .filter(|c| c.generation == generation)
                    .and_then(|c| c.socket.clone())
            });
            if let Some(socket) = socket {
                send(&socket, &json!({ "type": "pong" }));
            }
        }
        "next" | "error" | "complete" => {
            let Some(id) = msg["id"].as_str().and_then(|s| s.parse::<u64>().ok()) else {
                return;
            };
            let event = match kind {
                "next" => SubEvent::Next(msg["payload"].clone()),
                "error" => SubEvent::Failed(
                    msg["payload"][0]["message"]
                        .as_str()
                        .unwrap_or("The subscription was refused")
                        .to_owned(),
                ),
                _ => SubEvent::Complete,
            };
            let last = !matches!(event, SubEvent::Next(_));
            deliver(id, event, last);
        }
        _ => {}
    }
}

/// Calls the handler of `id` outside of any borrow (it may subscribe or cancel), then puts it
/// back unless this was the subscription's last event.
fn deliver(id: u64, event: SubEvent, last: bool) {
    let handler = CLIENT.with_borrow_mut(|slot| {
        let c = slot.as_mut()?;
        if last {
            c.subs.remove(&id).and_then(|s| s.handler)
        } else {
            c.subs.get_mut(&id).and_then(|s| s.handler.take())
        }
    });
    let Some(mut handler) = handler else { return };
    handler(event);
    if !last {
        CLIENT.with_borrow_mut(|slot| {
            if let Some(sub) = slot.as_mut().and_then(|c| c.subs.get_mut(&id)) {
                sub.handler = Some(handler);
            }
        });
    }
}

fn on_close(generation: u64, code: u16) {
    let retry = CLIENT.with_borrow_mut(|slot| {
        let c = slot.as_mut().filter(|c| c.generation == generation)?;
        c.socket = None;
        c.acked = false;
        if code == FORBIDDEN || c.subs.is_empty() {
            return Some(None);
        }
        c.retries = c.retries.saturating_add(1);
        Some(Some(c.retries))
    });
    match retry {
        Some(None) if code == FORBIDDEN => fail_all("Invalid or revoked token"),
        Some(Some(n)) => {
            let delay = Duration::from_millis((500u64 << n.min(5)).min(10_000));
            leptos::prelude::set_timeout(
                move || {
                    let wanted = CLIENT.with_borrow(|slot| {
                        slot.as_ref()
                            .is_some_and(|c| c.socket.is_none() && !c.subs.is_empty())
                    });
                    if wanted {
                        open_socket();
                    }
                },
                delay,
            );
        }
        _ => {}
    }
}

/// Ends every subscription with `reason`.
fn fail_all(reason: &str) {
    let ids: Vec<u64> = CLIENT.with_borrow(|slot| {
        slot.as_ref()
            .map(|c| c.subs.keys().copied().collect())
            .unwrap_or_default()
    });
    for id in ids {
        deliver(id, SubEvent::Failed(reason.to_owned()), true);
    }
}
