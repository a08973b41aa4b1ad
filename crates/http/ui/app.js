// The web UI: a single page over the HTTP API (README, Web UI). Everything it shows comes
// from the API with the JWT of its login, kept in sessionStorage (gone with the tab).
//
// Safety rule: nothing from the server is ever parsed as markup. Elements are built with
// `el` and text goes in with text nodes only; the page's content security policy (no
// inline script) backs this up.
"use strict";

const TOKEN_KEY = "iggy.token";
const BROWSER_CONSUMER = "iggy-web-ui";
let refreshTimer = null;

// ---------------------------------------------------------------- elements and text

/** An element with attributes (`on*` keys become listeners) and children (strings become text). */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function show(...children) {
  const main = document.getElementById("main");
  main.replaceChildren();
  append(main, children);
}

function toast(message, isError = false) {
  const box = el("div", { class: isError ? "error" : "" }, message);
  document.getElementById("toast").appendChild(box);
  setTimeout(() => box.remove(), isError ? 6000 : 3000);
}

function table(headers, rows, empty = "Nothing here yet.") {
  if (rows.length === 0) return el("p", { class: "muted" }, empty);
  const head = el("tr", {}, headers.map((h) => el("th", { class: h.num ? "num" : "" }, h.label ?? h)));
  const body = rows.map((cells) =>
    el("tr", {}, cells.map((cell, i) => el("td", { class: headers[i]?.num ? "num" : "" }, cell))),
  );
  return el("table", {}, el("thead", {}, head), el("tbody", {}, body));
}

function field(label, input) {
  return el("label", {}, label, input);
}

function crumbs(...links) {
  return el("div", { class: "crumbs" }, links.flatMap((link, i) => [i ? " / " : "", link]));
}

/** Bytes as B, kB, MB, GB (decimal, as the API's sizes). */
function bytes(n) {
  if (typeof n !== "number") return String(n ?? "");
  const units = ["B", "kB", "MB", "GB", "TB"];
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
}

const number = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : String(n ?? ""));
const time = (micros) => (micros ? new Date(micros / 1000).toISOString().replace("T", " ").replace("Z", "") : "");
const enc = encodeURIComponent;

// ---------------------------------------------------------------- the API

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

class ApiError extends Error {
  constructor(status, body) {
    super(body?.reason ? `${body.reason} (${body.code ?? status})` : `HTTP ${status}`);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = {};
  if (token()) headers.authorization = `Bearer ${token()}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401 && !path.endsWith("/login")) {
    sessionStorage.removeItem(TOKEN_KEY);
    location.hash = "#/login";
    throw new ApiError(401, { reason: "your session ended: log in again" });
  }
  const text = await response.text();
  // Message ids are 128-bit numbers, past what a JavaScript number holds exactly: long
  // ids are read as strings so they show as sent.
  const exact = text.replace(/"id":(\d{16,})/g, '"id":"$1"');
  const parsed = text && (response.headers.get("content-type") ?? "").includes("json") ? JSON.parse(exact) : text;
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

/** Runs an action from a button or form, reporting its failure instead of throwing. */
async function act(work, done) {
  try {
    await work();
  } catch (error) {
    toast(error.message, true);
    return;
  }
  try {
    // Announced only once the page shows the change: a notice never stands beside the old view.
    await render();
  } catch (error) {
    // The action was done; only the page failed to show it, and a retry would repeat it.
    if (done) toast(done);
    toast(error.message, true);
    return;
  }
  if (done) toast(done);
}

// ---------------------------------------------------------------- bytes

function base64ToBytes(text) {
  const binary = atob(text ?? "");
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function bytesToBase64(bytes) {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

const textBase64 = (text) => bytesToBase64(new TextEncoder().encode(text));

function u32Base64(value) {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, value, true);
  return bytesToBase64(bytes);
}

function utf8(bytes) {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");

/** A payload as text in `format` (auto, json, string, hex); never markup. */
function renderPayload(bytes, format) {
  const text = utf8(bytes);
  if (format === "hex" || (format !== "string" && text === null)) return hex(bytes);
  if (format === "string") return text ?? hex(bytes);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return format === "json" ? `not JSON: ${text}` : text;
  }
}

function headerText(entry) {
  const bytes = base64ToBytes(entry.value);
  if (entry.kind === "string") return utf8(bytes) ?? hex(bytes);
  if (entry.kind === "bool") return bytes[0] ? "true" : "false";
  if (/^(u?int|float)/.test(entry.kind) && bytes.length <= 8) {
    const view = new DataView(bytes.buffer);
    const reads = {
      uint8: () => view.getUint8(0), uint16: () => view.getUint16(0, true), uint32: () => view.getUint32(0, true),
      uint64: () => view.getBigUint64(0, true), int8: () => view.getInt8(0), int16: () => view.getInt16(0, true),
      int32: () => view.getInt32(0, true), int64: () => view.getBigInt64(0, true),
      float32: () => view.getFloat32(0, true), float64: () => view.getFloat64(0, true),
    };
    if (reads[entry.kind]) return String(reads[entry.kind]());
  }
  return hex(bytes);
}

// ---------------------------------------------------------------- pages

async function loginPage() {
  document.getElementById("nav").hidden = true;
  const username = el("input", { name: "username", autocomplete: "username", required: true });
  const password = el("input", { name: "password", type: "password", autocomplete: "current-password", required: true });
  const form = el(
    "form",
    {
      id: "login-form",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          const reply = await api("POST", "/users/login", { username: username.value, password: password.value });
          sessionStorage.setItem(TOKEN_KEY, reply.access_token.token);
          location.hash = "#/";
        } catch (error) {
          toast(error.message, true);
        }
      },
    },
    field("Username", username),
    field("Password", password),
    el("button", { class: "primary", type: "submit" }, "Log in"),
  );
  show(el("div", { class: "login card" }, el("h1", {}, "Log in to Iggy"), form));
  username.focus();
}

const metricsHistory = { samples: [], previous: null };

async function overviewPage() {
  const stats = await api("GET", "/stats");
  const tiles = [
    ["Streams", stats.streams_count], ["Topics", stats.topics_count], ["Partitions", stats.partitions_count],
    ["Segments", stats.segments_count], ["Messages", stats.messages_count], ["Stored", bytes(stats.messages_size_bytes)],
    ["Clients", stats.clients_count], ["Consumer groups", stats.consumer_groups_count],
    ["Memory", bytes(stats.memory_usage)], ["CPU", `${Number(stats.cpu_usage ?? 0).toFixed(1)} %`],
    ["Version", stats.iggy_server_version], ["Up since", time(stats.start_time)],
  ];
  const charts = el("div", { class: "charts", id: "charts" });
  show(
    el("h1", {}, "Overview"),
    el("div", { class: "stats" }, tiles.map(([label, value]) => el("div", { class: "stat" }, label, el("b", {}, typeof value === "number" ? number(value) : value ?? "")))),
    el("h2", {}, "Live"),
    el("p", { class: "muted" }, "From the server's metrics, sampled every 2 s (the last 2 minutes)."),
    charts,
  );
  await sampleMetrics(charts);
  refreshTimer = setInterval(() => sampleMetrics(charts), 2000);
}

/** Sums of each metric family, and each latency histogram's buckets per command. */
function parseMetrics(text) {
  const sums = {};
  const buckets = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([a-z_]+)(\{([^}]*)\})?\s+([0-9.eE+-]+|\+Inf|NaN)/.exec(line);
    if (!match) continue;
    const [, name, , labels = "", raw] = match;
    const value = Number(raw);
    sums[name] = (sums[name] ?? 0) + value;
    if (name === "iggy_request_duration_seconds_bucket") {
      const command = /command="([^"]+)"/.exec(labels)?.[1];
      const le = /le="([^"]+)"/.exec(labels)?.[1];
      if (command && le) {
        const key = `${command}|${le}`;
        buckets[key] = (buckets[key] ?? 0) + value;
      }
    }
  }
  return { sums, buckets, at: performance.now() };
}

/** The `q` quantile (ms) of the requests of `command` between two samples. */
function quantile(previous, current, command, q) {
  const rows = [];
  for (const [key, count] of Object.entries(current.buckets)) {
    const [name, le] = key.split("|");
    if (name !== command) continue;
    rows.push([le === "+Inf" ? Infinity : Number(le), count - (previous.buckets[key] ?? 0)]);
  }
  rows.sort((a, b) => a[0] - b[0]);
  const total = rows.length ? rows[rows.length - 1][1] : 0;
  if (total <= 0) return null;
  const target = total * q;
  for (const [le, count] of rows) if (count >= target) return Number.isFinite(le) ? le * 1000 : null;
  return null;
}

async function sampleMetrics(charts) {
  let current;
  try {
    current = parseMetrics(await api("GET", "/metrics"));
  } catch (error) {
    charts.replaceChildren(el("p", { class: "muted" }, `No metrics: ${error.message}`));
    return;
  }
  const previous = metricsHistory.previous;
  metricsHistory.previous = current;
  if (previous) {
    const seconds = (current.at - previous.at) / 1000;
    const rate = (name) => Math.max(0, ((current.sums[name] ?? 0) - (previous.sums[name] ?? 0)) / seconds);
    metricsHistory.samples.push({
      messages: rate("iggy_messages"),
      megabytes: rate("iggy_messages_bytes") / 1e6,
      sendP50: quantile(previous, current, "send_messages", 0.5),
      sendP99: quantile(previous, current, "send_messages", 0.99),
      pollP50: quantile(previous, current, "poll_messages", 0.5),
      pollP99: quantile(previous, current, "poll_messages", 0.99),
    });
    if (metricsHistory.samples.length > 60) metricsHistory.samples.shift();
  }
  const s = metricsHistory.samples;
  charts.replaceChildren(
    chart("Messages stored per second", [["messages/s", "#ff6a1f", s.map((x) => x.messages)]]),
    chart("Megabytes stored per second", [["MB/s", "#1e88e5", s.map((x) => x.megabytes)]]),
    chart("Send latency (ms)", [["p50", "#2e7d32", s.map((x) => x.sendP50)], ["p99", "#c62828", s.map((x) => x.sendP99)]]),
    chart("Poll latency (ms)", [["p50", "#2e7d32", s.map((x) => x.pollP50)], ["p99", "#c62828", s.map((x) => x.pollP99)]]),
  );
}

/** A line chart of up to 60 points per series, as SVG built element by element. */
function chart(title, series) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("viewBox", "0 0 600 160");
  svg.setAttribute("preserveAspectRatio", "none");
  const values = series.flatMap(([, , points]) => points.filter((v) => v !== null));
  const top = Math.max(1e-9, ...values) * 1.1;
  for (const [, color, points] of series) {
    const line = document.createElementNS(ns, "polyline");
    const coordinates = points
      .map((v, i) => (v === null ? null : `${(i / 59) * 600},${160 - (v / top) * 150}`))
      .filter(Boolean);
    line.setAttribute("points", coordinates.join(" "));
    line.setAttribute("stroke", color);
    svg.appendChild(line);
  }
  const latest = (points) => {
    const value = points.filter((v) => v !== null).at(-1);
    return value === undefined ? "—" : value.toFixed(value < 10 ? 2 : 0);
  };
  // Colours go through the style object: the page's policy blocks style attributes.
  const legend = el("div", { class: "legend" }, series.map(([name, color, points]) => {
    const entry = el("span", {}, `${name}: ${latest(points)}`);
    entry.style.color = color;
    return entry;
  }));
  return el("div", { class: "card" }, el("b", {}, title), svg, legend);
}

async function streamsPage() {
  const streams = await api("GET", "/streams");
  const name = el("input", { name: "stream-name", placeholder: "name", required: true });
  const create = el(
    "form",
    { class: "inline", id: "create-stream", onsubmit: (e) => { e.preventDefault(); act(() => api("POST", "/streams", { name: name.value }), "Stream created"); } },
    field("New stream", name),
    el("button", { class: "primary", type: "submit" }, "Create stream"),
  );
  const rows = streams.map((s) => [
    s.id,
    el("a", { href: `#/streams/${s.id}` }, s.name),
    number(s.topics_count),
    number(s.messages_count),
    bytes(s.size),
    time(s.created_at),
    el(
      "div",
      { class: "actions" },
      el("button", { onclick: () => rename(`/streams/${s.id}`, s.name) }, "Rename"),
      el("button", { onclick: () => confirm(`Purge every message of stream ${s.name}?`) && act(() => api("DELETE", `/streams/${s.id}/purge`), "Stream purged") }, "Purge"),
      el("button", { class: "danger", onclick: () => confirm(`Delete stream ${s.name} and everything in it?`) && act(() => api("DELETE", `/streams/${s.id}`), "Stream deleted") }, "Delete"),
    ),
  ]);
  show(
    el("h1", {}, "Streams"),
    el("div", { class: "card" }, create),
    table(["ID", "Name", { label: "Topics", num: true }, { label: "Messages", num: true }, "Size", "Created", ""], rows, "No streams yet."),
  );
}

function rename(path, current, key = "name") {
  const name = prompt("New name", current);
  if (name && name !== current) act(() => api("PUT", path, { [key]: name }), "Renamed");
}

async function streamPage(streamId) {
  const stream = await api("GET", `/streams/${enc(streamId)}`);
  const name = el("input", { name: "topic-name", placeholder: "name", required: true });
  const partitions = el("input", { name: "topic-partitions", type: "number", min: 0, value: 1 });
  const expiry = el("input", { name: "topic-expiry", placeholder: "never (seconds)" });
  const create = el(
    "form",
    {
      class: "inline",
      id: "create-topic",
      onsubmit: (e) => {
        e.preventDefault();
        const options = {};
        if (expiry.value.trim()) options.message_expiry = Math.round(Number(expiry.value) * 1e6);
        act(() => api("POST", `/streams/${stream.id}/topics`, { name: name.value, partitions_count: Number(partitions.value), options }), "Topic created");
      },
    },
    field("New topic", name),
    field("Partitions", partitions),
    field("Message expiry", expiry),
    el("button", { class: "primary", type: "submit" }, "Create topic"),
  );
  const rows = (stream.topics ?? []).map((t) => [
    t.id,
    el("a", { href: `#/streams/${stream.id}/topics/${t.id}` }, t.name),
    number(t.partitions_count),
    number(t.messages_count),
    bytes(t.size),
    time(t.created_at),
    el(
      "div",
      { class: "actions" },
      el("button", { onclick: () => rename(`/streams/${stream.id}/topics/${t.id}`, t.name) }, "Rename"),
      el("button", { onclick: () => confirm(`Purge every message of topic ${t.name}?`) && act(() => api("DELETE", `/streams/${stream.id}/topics/${t.id}/purge`), "Topic purged") }, "Purge"),
      el("button", { class: "danger", onclick: () => confirm(`Delete topic ${t.name}?`) && act(() => api("DELETE", `/streams/${stream.id}/topics/${t.id}`), "Topic deleted") }, "Delete"),
    ),
  ]);
  show(
    crumbs(el("a", { href: "#/streams" }, "Streams")),
    el("h1", {}, `Stream ${stream.name}`),
    el("p", { class: "muted" }, `${number(stream.messages_count)} messages, ${bytes(stream.size)}`),
    el("div", { class: "card" }, create),
    table(["ID", "Name", { label: "Partitions", num: true }, { label: "Messages", num: true }, "Size", "Created", ""], rows, "No topics yet."),
  );
}

async function topicPage(streamId, topicId) {
  const base = `/streams/${enc(streamId)}/topics/${enc(topicId)}`;
  const [stream, topic, groups] = await Promise.all([
    api("GET", `/streams/${enc(streamId)}`),
    api("GET", base),
    api("GET", `${base}/consumer-groups`),
  ]);
  const partitionRows = (topic.partitions ?? []).map((p) => [
    p.id, number(p.messages_count), number(p.current_offset), bytes(p.size), number(p.segments_count), time(p.created_at),
  ]);
  const count = el("input", { type: "number", min: 1, value: 1, name: "partitions-count" });
  const partitionForm = el(
    "form",
    { class: "inline" },
    field("Partitions", count),
    el("button", { type: "button", onclick: () => act(() => api("POST", `${base}/partitions`, { partitions_count: Number(count.value) }), "Partitions added") }, "Add"),
    el("button", { type: "button", class: "danger", onclick: () => confirm(`Delete the last ${count.value} partition(s) and their messages?`) && act(() => api("DELETE", `${base}/partitions?partitions_count=${Number(count.value)}`), "Partitions deleted") }, "Delete"),
  );
  const groupName = el("input", { name: "group-name", placeholder: "name", required: true });
  const groupForm = el(
    "form",
    { class: "inline", id: "create-group", onsubmit: (e) => { e.preventDefault(); act(() => api("POST", `${base}/consumer-groups`, { name: groupName.value }), "Consumer group created"); } },
    field("New consumer group", groupName),
    el("button", { class: "primary", type: "submit" }, "Create group"),
  );
  const groupRows = groups.map((g) => [
    g.id,
    el("a", { href: `#/streams/${stream.id}/topics/${topic.id}/groups/${g.id}` }, g.name),
    number(g.members_count),
    el("button", { class: "danger", onclick: () => confirm(`Delete consumer group ${g.name}?`) && act(() => api("DELETE", `${base}/consumer-groups/${g.id}`), "Group deleted") }, "Delete"),
  ]);
  const options = Object.entries(topic.options ?? {}).map(([key, value]) => [key, typeof value === "object" ? JSON.stringify(value) : String(value)]);
  show(
    crumbs(el("a", { href: "#/streams" }, "Streams"), el("a", { href: `#/streams/${stream.id}` }, stream.name)),
    el("h1", {}, `Topic ${topic.name}`),
    el("p", { class: "muted" }, `${number(topic.messages_count)} messages, ${bytes(topic.size)}`),
    el("h2", {}, "Partitions"),
    el("div", { class: "card" }, partitionForm),
    el("div", { id: "partitions" }, table(["ID", { label: "Messages", num: true }, { label: "Current offset", num: true }, "Size", { label: "Segments", num: true }, "Created"], partitionRows, "No partitions.")),
    el("h2", {}, "Consumer groups"),
    el("div", { class: "card" }, groupForm),
    el("div", { id: "groups" }, table(["ID", "Name", { label: "Members", num: true }, ""], groupRows, "No consumer groups.")),
    el("h2", {}, "Send a message"),
    sendForm(base, topic),
    el("h2", {}, "Browse messages"),
    browser(base, topic),
    el("h2", {}, "Options"),
    settingsForm(base),
    table(["Option", "Value"], options, "No options."),
  );
}

/** The topic's updatable settings: message expiry and maximum size (blank leaves one as it is). */
function settingsForm(base) {
  const expiry = el("input", { name: "edit-expiry", type: "number", min: 1, placeholder: "seconds" });
  const maxSize = el("input", { name: "edit-max-size", type: "number", min: 1, placeholder: "bytes" });
  return el(
    "form",
    {
      class: "card inline",
      id: "edit-topic",
      onsubmit: (e) => {
        e.preventDefault();
        const update = {};
        if (expiry.value) update.message_expiry = Math.round(Number(expiry.value) * 1e6);
        if (maxSize.value) update.max_topic_size = Math.round(Number(maxSize.value));
        if (Object.keys(update).length === 0) return toast("Nothing to change", true);
        act(() => api("PUT", base, update), "Topic updated");
      },
    },
    field("Message expiry", expiry),
    field("Maximum size", maxSize),
    el("button", { type: "submit" }, "Save"),
    el("button", { type: "button", onclick: () => act(() => api("PUT", base, { reset: ["message_expiry", "max_topic_size"] }), "Topic settings reset") }, "Reset to defaults"),
  );
}

function sendForm(base, topic) {
  const partition = el("select", { name: "send-partition" }, el("option", { value: "balanced" }, "balanced"), (topic.partitions ?? []).map((p) => el("option", { value: p.id }, `partition ${p.id}`)));
  const payload = el("textarea", { name: "send-payload", placeholder: "payload (text or JSON)" });
  const headers = el("textarea", { name: "send-headers", placeholder: "headers, one key: value per line (optional)" });
  return el(
    "form",
    {
      class: "card",
      id: "send-form",
      onsubmit: (e) => {
        e.preventDefault();
        const userHeaders = headers.value
          .split("\n")
          .map((line) => line.trim())
          .filter(Boolean)
          .map((line) => {
            const at = line.indexOf(":");
            const [key, value] = at < 0 ? [line, ""] : [line.slice(0, at).trim(), line.slice(at + 1).trim()];
            return { key: { kind: "string", value: textBase64(key) }, value: { kind: "string", value: textBase64(value) } };
          });
        const partitioning = partition.value === "balanced" ? { kind: "balanced", value: "" } : { kind: "partition_id", value: u32Base64(Number(partition.value)) };
        const message = { id: 0, payload: textBase64(payload.value), user_headers: userHeaders.length ? userHeaders : null };
        act(() => api("POST", `${base}/messages`, { partitioning, messages: [message] }), "Message sent");
      },
    },
    el("div", { class: "inline" }, field("Partition", partition)),
    field("Payload", payload),
    field("Headers", headers),
    el("button", { class: "primary", type: "submit" }, "Send"),
  );
}

function browser(base, topic) {
  const partition = el("select", { name: "browse-partition" }, (topic.partitions ?? []).map((p) => el("option", { value: p.id }, `partition ${p.id}`)));
  const kind = el("select", { name: "browse-kind" }, ["offset", "timestamp", "first", "last"].map((k) => el("option", { value: k }, k)));
  const value = el("input", { name: "browse-value", value: "0", placeholder: "offset, or a date for timestamp" });
  const count = el("input", { name: "browse-count", type: "number", min: 1, max: 1000, value: 20 });
  const format = el("select", { name: "browse-format" }, ["auto", "json", "string", "hex"].map((f) => el("option", { value: f }, f)));
  const results = el("div", { id: "messages" });
  const load = async () => {
    let start = value.value.trim();
    if (kind.value === "timestamp") {
      const parsed = Date.parse(start);
      start = Number.isNaN(parsed) ? start : String(parsed * 1000);
    }
    const query = new URLSearchParams({
      consumer_id: BROWSER_CONSUMER, partition_id: partition.value, kind: kind.value, value: start || "0",
      count: count.value, auto_commit: "false",
    });
    try {
      const polled = await api("GET", `${base}/messages?${query}`);
      const rows = polled.messages.map((m) => [
        number(m.header.offset),
        time(m.header.timestamp),
        String(m.header.id),
        el("pre", { class: "payload" }, renderPayload(base64ToBytes(m.payload), format.value)),
        el("pre", {}, (m.user_headers ?? []).map((h) => `${headerText(h.key)} (${h.value.kind}) = ${headerText(h.value)}`).join("\n")),
      ]);
      results.replaceChildren(table([{ label: "Offset", num: true }, "Timestamp", "ID", "Payload", "Headers"], rows, "No messages there."));
    } catch (error) {
      toast(error.message, true);
    }
  };
  const form = el(
    "form",
    { class: "inline", id: "browse-form", onsubmit: (e) => { e.preventDefault(); load(); } },
    field("Partition", partition), field("From", kind), field("Value", value), field("Count", count), field("Show payload as", format),
    el("button", { class: "primary", type: "submit" }, "Load"),
  );
  return el("div", { class: "card" }, form, results);
}

async function groupPage(streamId, topicId, groupId) {
  const base = `/streams/${enc(streamId)}/topics/${enc(topicId)}`;
  const body = el("div", { id: "group" });
  show(
    crumbs(el("a", { href: "#/streams" }, "Streams"), el("a", { href: `#/streams/${enc(streamId)}` }, String(streamId)), el("a", { href: `#/streams/${enc(streamId)}/topics/${enc(topicId)}` }, String(topicId))),
    body,
  );
  const load = async () => {
    const lag = await api("GET", `${base}/consumer-groups/${enc(groupId)}/lag`);
    body.replaceChildren(
      el("h1", {}, `Consumer group ${lag.name}`),
      el("p", {}, "Total lag: ", el("b", { id: "group-lag" }, number(lag.lag)), " message(s) (refreshed every 2 s)"),
      el("h2", {}, "Members"),
      table(["Member", "Partitions"], lag.members.map((m) => [m.id, m.partitions.join(", ")]), "No members are connected."),
      el("h2", {}, "Partitions"),
      table(
        ["Partition", { label: "Current offset", num: true }, { label: "Stored offset", num: true }, { label: "Lag", num: true }],
        lag.partitions.map((p) => [p.partition_id, number(p.current_offset), p.stored_offset === null ? "—" : number(p.stored_offset), number(p.lag)]),
      ),
    );
  };
  await load();
  refreshTimer = setInterval(() => load().catch((error) => toast(error.message, true)), 2000);
}

const GLOBAL_PERMISSIONS = [
  "manage_servers", "read_servers", "manage_users", "read_users", "manage_streams",
  "read_streams", "manage_topics", "read_topics", "poll_messages", "send_messages",
];

function permissionBoxes(current = {}) {
  const boxes = GLOBAL_PERMISSIONS.map((name) => [name, el("input", { type: "checkbox", name: `perm-${name}`, checked: current[name] === true })]);
  const node = el("div", { class: "actions" }, boxes.map(([name, box]) => el("label", { class: "check" }, box, name)));
  const value = () => ({ global: Object.fromEntries(boxes.map(([name, box]) => [name, box.checked])) });
  return { node, value };
}

async function usersPage() {
  const users = await api("GET", "/users");
  const username = el("input", { name: "new-username", required: true });
  const password = el("input", { name: "new-password", type: "password", required: true });
  const permissions = permissionBoxes();
  const create = el(
    "form",
    { id: "create-user", onsubmit: (e) => { e.preventDefault(); act(() => api("POST", "/users", { username: username.value, password: password.value, status: "active", permissions: permissions.value() }), "User created"); } },
    el("div", { class: "inline" }, field("Username", username), field("Password", password)),
    el("p", { class: "muted" }, "Global permissions"),
    permissions.node,
    el("p", {}, el("button", { class: "primary", type: "submit" }, "Create user")),
  );
  const rows = users.map((u) => [
    u.id,
    el("a", { href: `#/users/${u.id}` }, u.username),
    el("span", { class: `tag ${u.status === "active" ? "good" : "bad"}` }, u.status),
    time(u.created_at),
  ]);
  show(el("h1", {}, "Users"), el("div", { class: "card" }, create), table(["ID", "Username", "Status", "Created"], rows));
}

async function userPage(userId) {
  const user = await api("GET", `/users/${enc(userId)}`);
  const permissions = permissionBoxes(user.permissions?.global ?? {});
  const streams = user.permissions?.streams;
  const current = el("input", { type: "password", name: "current-password" });
  const next = el("input", { type: "password", name: "new-password" });
  const status = user.status === "active" ? "inactive" : "active";
  show(
    crumbs(el("a", { href: "#/users" }, "Users")),
    el("h1", {}, `User ${user.username}`),
    el("p", {}, el("span", { class: `tag ${user.status === "active" ? "good" : "bad"}` }, user.status), " created ", time(user.created_at)),
    el(
      "div",
      { class: "card" },
      el("b", {}, "Global permissions"),
      permissions.node,
      streams ? el("p", { class: "muted" }, "Stream permissions: ", el("pre", {}, JSON.stringify(streams, null, 2))) : null,
      el("p", { class: "actions" },
        el("button", { class: "primary", onclick: () => act(() => api("PUT", `/users/${user.id}/permissions`, { permissions: { ...permissions.value(), streams: streams ?? undefined } }), "Permissions saved") }, "Save permissions"),
        el("button", { onclick: () => act(() => api("PUT", `/users/${user.id}`, { status }), `User ${status}`) }, status === "active" ? "Activate" : "Deactivate"),
        el("button", { onclick: () => rename(`/users/${user.id}`, user.username, "username") }, "Rename"),
        el("button", { class: "danger", onclick: () => confirm(`Delete user ${user.username}?`) && act(async () => { await api("DELETE", `/users/${user.id}`); location.hash = "#/users"; }, "User deleted") }, "Delete"),
      ),
    ),
    el(
      "form",
      { class: "card inline", onsubmit: (e) => { e.preventDefault(); act(() => api("PUT", `/users/${user.id}/password`, { current_password: current.value, new_password: next.value }), "Password changed"); } },
      field("Current password", current),
      field("New password", next),
      el("button", { type: "submit" }, "Change password"),
    ),
  );
}

async function tokensPage() {
  const tokens = await api("GET", "/personal-access-tokens");
  const name = el("input", { name: "token-name", required: true });
  const expiry = el("input", { name: "token-expiry", type: "number", min: 0, placeholder: "never (seconds)" });
  const minted = el("div", { id: "minted" });
  const create = el(
    "form",
    {
      class: "inline",
      id: "create-token",
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          const reply = await api("POST", "/personal-access-tokens", { name: name.value, expiry: Number(expiry.value || 0) });
          await render();
          document.getElementById("minted").replaceChildren(el("p", { class: "token" }, "Copy the token now; it is not shown again: ", el("code", {}, reply.token)));
        } catch (error) {
          toast(error.message, true);
        }
      },
    },
    field("Name", name),
    field("Expires after", expiry),
    el("button", { class: "primary", type: "submit" }, "Create token"),
  );
  const rows = tokens.map((t) => [
    t.name,
    t.expiry_at ? time(t.expiry_at) : "never",
    el("button", { class: "danger", onclick: () => confirm(`Delete token ${t.name}?`) && act(() => api("DELETE", `/personal-access-tokens/${enc(t.name)}`), "Token deleted") }, "Delete"),
  ]);
  show(el("h1", {}, "Personal access tokens"), el("div", { class: "card" }, create, minted), table(["Name", "Expires", ""], rows, "No tokens."));
}

async function clientsPage() {
  const clients = await api("GET", "/clients");
  const rows = clients.map((c) => [c.client_id, c.user_id ?? "—", c.address, c.transport, number(c.consumer_groups_count)]);
  show(el("h1", {}, "Connected clients"), table(["Client", "User", "Address", "Transport", { label: "Groups", num: true }], rows, "No clients connected."));
}

async function logsPage() {
  const output = el("pre", { class: "log", id: "log" });
  let after = 0;
  const follow = el("input", { type: "checkbox", checked: true });
  show(el("h1", {}, "Server log"), el("p", {}, el("label", { class: "check" }, follow, "Follow new lines")), output);
  const load = async () => {
    const reply = await api("GET", `/system/logs?after=${after}&limit=1000`);
    after = reply.next;
    for (const line of reply.lines) output.appendChild(document.createTextNode(`${line.line}\n`));
    while (output.childNodes.length > 5000) output.firstChild.remove();
    if (follow.checked && reply.lines.length) output.scrollTop = output.scrollHeight;
  };
  await load();
  refreshTimer = setInterval(() => load().catch((error) => toast(error.message, true)), 1000);
}

async function configPage() {
  const reply = await api("GET", "/system/config");
  show(el("h1", {}, "Effective configuration"), el("p", { class: "muted" }, "As the server runs it; secrets are redacted."), el("pre", { class: "config", id: "config" }, reply.toml));
}

// ---------------------------------------------------------------- routing

const ROUTES = [
  [/^#\/login$/, loginPage],
  [/^#\/?$/, overviewPage],
  [/^#\/streams$/, streamsPage],
  [/^#\/streams\/([^/]+)$/, streamPage],
  [/^#\/streams\/([^/]+)\/topics\/([^/]+)$/, topicPage],
  [/^#\/streams\/([^/]+)\/topics\/([^/]+)\/groups\/([^/]+)$/, groupPage],
  [/^#\/users$/, usersPage],
  [/^#\/users\/([^/]+)$/, userPage],
  [/^#\/tokens$/, tokensPage],
  [/^#\/clients$/, clientsPage],
  [/^#\/logs$/, logsPage],
  [/^#\/config$/, configPage],
];

async function render() {
  clearInterval(refreshTimer);
  refreshTimer = null;
  const hash = location.hash || "#/";
  if (!token() && hash !== "#/login") {
    location.hash = "#/login";
    return;
  }
  document.getElementById("nav").hidden = !token();
  for (const link of document.querySelectorAll("nav a")) {
    const target = link.getAttribute("href");
    link.classList.toggle("active", target === "#/" ? hash === "#/" : hash.startsWith(target));
  }
  for (const [pattern, page] of ROUTES) {
    const match = pattern.exec(hash);
    if (!match) continue;
    try {
      await page(...match.slice(1).map(decodeURIComponent));
    } catch (error) {
      show(el("h1", {}, "Something went wrong"), el("p", { class: "muted" }, error.message));
    }
    return;
  }
  show(el("h1", {}, "Not found"), el("p", {}, el("a", { href: "#/" }, "Back to the overview")));
}

document.getElementById("logout").addEventListener("click", async () => {
  try {
    await api("DELETE", "/users/logout");
  } catch {
    // The session is gone either way.
  }
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = "#/login";
});
window.addEventListener("hashchange", render);
render();
