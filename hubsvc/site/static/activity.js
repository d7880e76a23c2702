// Live activity: the feed of every readable repository, then the WebSocket for what
// happens next; after a drop, the feed from its cursor and the socket from there again,
// so nothing is missed, and events are keyed by id so nothing shows twice.
import { get } from "./api.js";
import { h, mount } from "./dom.js";
import { eventLine } from "./events.js";

const KEEP = 200; // lines on the page
const POLL_MS = 15000; // the feed also catches readable repositories the socket doesn't follow
const seen = new Map(); // id (BigInt) → <li>
let feedCursor = "0";
let socket = null;
let stopped = true;
let attempt = 0;
let retryTimer = null;
let pollTimer = null;
let list = null;
const repos = new Map(); // "owner/name" → {owner, name}: followed live on the socket
let following = new Set(); // what the current socket was asked to follow

function setStatus(text, kind) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = `status ${kind || ""}`;
}

function add(event) {
  const id = BigInt(event.id);
  if (seen.has(id)) return;
  const li = eventLine(event);
  seen.set(id, li);
  follow(event.repository);
  // Newest first: before the first line with a smaller id.
  let before = null;
  for (const node of list.children) {
    if (BigInt(node.dataset.id) < id) {
      before = node;
      break;
    }
  }
  list.insertBefore(li, before);
  while (list.children.length > KEEP) {
    const last = list.lastElementChild;
    seen.delete(BigInt(last.dataset.id));
    last.remove();
  }
  document.getElementById("empty")?.remove();
}

async function drainFeed() {
  for (;;) {
    let page;
    try {
      page = await get(`/api/events?limit=100&after=${feedCursor}`);
    } catch (err) {
      if (err.status === 410) {
        feedCursor = "0"; // pruned past the cursor: start again from the oldest kept
        continue;
      }
      throw err;
    }
    page.events.forEach(add);
    feedCursor = page.lastEventId;
    if (!page.hasMore) return;
  }
}

// The socket sends on its own only what the user owns, collaborates on or starred; other
// readable repositories in the feed are subscribed to on this socket, so they are live too.
function follow(repo) {
  if (!repo) return;
  const key = `${repo.owner}/${repo.name}`;
  repos.set(key, { owner: repo.owner, name: repo.name });
  if (socket && socket.readyState === WebSocket.OPEN && !following.has(key)) {
    following.add(key);
    socket.send(JSON.stringify({ type: "subscribe", repository: repos.get(key) }));
  }
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/ws?after=${feedCursor}`);
  socket = ws;
  ws.onopen = () => {
    attempt = 0;
    following = new Set();
    for (const repo of repos.values()) follow(repo);
    setStatus("live", "live");
  };
  ws.onmessage = (msg) => {
    let m;
    try {
      m = JSON.parse(msg.data);
    } catch (_) {
      return;
    }
    if (m.type === "notification" && m.notification) add(m.notification);
    else if (m.type === "ping") ws.send(JSON.stringify({ type: "pong" }));
    else if (m.type === "resync") ws.close(); // the reconnect reads the feed again
  };
  ws.onclose = (ev) => {
    if (socket !== ws) return;
    socket = null;
    if (stopped) return;
    if (ev.code === 4001) {
      location.hash = "#/sign-in";
      return;
    }
    retry();
  };
}

function retry() {
  // Backoff 0.5 s, 1 s, 2 s … up to 10 s, with jitter so a restarted server isn't stampeded.
  const delay = Math.min(10000, 500 * 2 ** attempt) * (0.75 + Math.random() / 2);
  attempt += 1;
  setStatus("reconnecting…", "reconnecting");
  clearTimeout(retryTimer);
  retryTimer = setTimeout(resume, delay);
}

async function resume() {
  if (stopped) return;
  try {
    await drainFeed();
  } catch (err) {
    if (err.status === 401) {
      location.hash = "#/sign-in";
      return;
    }
    retry();
    return;
  }
  connect();
}

export function stopActivity() {
  stopped = true;
  clearTimeout(retryTimer);
  clearInterval(pollTimer);
  if (socket) {
    const ws = socket;
    socket = null;
    ws.close();
  }
  setStatus("", "");
}

export async function showActivity() {
  stopActivity();
  stopped = false;
  seen.clear();
  repos.clear();
  feedCursor = "0";
  list = h("ol", { id: "events", class: "events" });
  mount(
    h("h1", {}, "Activity"),
    h("p", { class: "muted", id: "empty" }, "Nothing has happened yet in the repositories you can read."),
    list,
  );
  setStatus("connecting…", "reconnecting");
  await resume();
  pollTimer = setInterval(() => {
    if (socket && socket.readyState === WebSocket.OPEN) drainFeed().catch(() => {});
  }, POLL_MS);
}
