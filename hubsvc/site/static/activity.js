// Live activity: one WebSocket subscribed to every repository the user may read
// (/ws?subscribe=all, new repositories too), and the newest page of the feed read back
// from the socket's first cursor (GET /api/events?before=), older pages on demand.
// After a drop the socket comes back with ?after= its last event id, so the server
// replays what was missed; events are keyed by id, so nothing shows twice.
import { ApiError, get } from "./api.js";
import { h, mount } from "./dom.js";
import { eventLine } from "./events.js";

const KEEP = 300; // lines on the page; older ones come back with "Older"
const PAGE = 30;
const seen = new Map(); // id (BigInt) → <li>
let cursor = null; // the newest event id settled: every readable one up to it was offered
let socket = null;
let stopped = true;
let attempt = 0;
let retryTimer = null;
let list = null;
let older = null; // the "Older" button

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
    older.hidden = false; // what was dropped can be read again
  }
  document.getElementById("empty").hidden = true;
}

// The page of the feed just before the oldest line shown (or before the socket's first
// cursor, on an empty page): live events cover everything after that.
async function loadOlder() {
  const oldest = list.lastElementChild ? BigInt(list.lastElementChild.dataset.id) : cursor + 1n;
  older.disabled = true;
  try {
    const page = await get(`/api/events?limit=${PAGE}&before=${oldest}`);
    page.events.forEach(add);
    older.hidden = !page.hasMore;
    if (!list.children.length) document.getElementById("empty").hidden = false;
  } catch (err) {
    older.hidden = false;
    older.textContent = "Try again";
    throw err;
  } finally {
    older.disabled = false;
  }
  older.textContent = "Older";
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const after = cursor === null ? "" : `&after=${cursor}`;
  const ws = new WebSocket(`${proto}//${location.host}/ws?subscribe=all${after}`);
  socket = ws;
  ws.onmessage = (msg) => {
    let m;
    try {
      m = JSON.parse(msg.data);
    } catch (_) {
      return;
    }
    if (m.type === "notification" && m.notification) {
      const id = BigInt(m.notification.id);
      if (cursor === null || id > cursor) cursor = id;
      add(m.notification);
    } else if (m.type === "connected") {
      attempt = 0;
      setStatus("live", "live");
      if (cursor === null) {
        // First connection: everything after lastEventId comes on this socket, and the
        // newest page up to it from the feed.
        cursor = BigInt(m.lastEventId);
        loadOlder().catch(() => setStatus("could not read the feed", "reconnecting"));
      }
    } else if (m.type === "ping") ws.send(JSON.stringify({ type: "pong" }));
    else if (m.type === "resync") {
      // Missed more than the server keeps: start again from the newest page.
      cursor = null;
      seen.clear();
      list.replaceChildren();
      ws.close();
    }
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
  // A refused upgrade tells the page nothing; a plain request says whether the session
  // is still good (401: sign in again) or the server is still away (try later).
  try {
    await get("/api/users/me");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) location.hash = "#/sign-in";
    else retry();
    return;
  }
  if (!stopped) connect();
}

export function stopActivity() {
  stopped = true;
  clearTimeout(retryTimer);
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
  cursor = null;
  attempt = 0;
  list = h("ol", { id: "events", class: "events" });
  older = h("button", { id: "older", type: "button", class: "more", hidden: true }, "Older");
  older.addEventListener("click", () => loadOlder().catch(() => {}));
  mount(
    h("h1", {}, "Activity"),
    h("p", { class: "muted", id: "empty", hidden: true }, "Nothing has happened yet in the repositories you can read."),
    list,
    older,
  );
  setStatus("connecting…", "reconnecting");
  connect();
}
