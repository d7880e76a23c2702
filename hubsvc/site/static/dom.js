// Building the page with text nodes only: nothing from the API is ever parsed as HTML.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "href") el.setAttribute("href", safeHref(value));
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Links are in-page (#/...) or same-origin paths; anything else (javascript:, data:,
// another origin) becomes a harmless fragment.
export function safeHref(value) {
  const text = String(value);
  if (text.startsWith("#/") || (text.startsWith("/") && !text.startsWith("//"))) return text;
  return "#/";
}

export function mount(...children) {
  const main = document.getElementById("main");
  // replaceChildren would write null as the text "null": leave the missing parts out.
  main.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return main;
}

export function relative(iso, now = Date.now()) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return "";
  const s = Math.max(0, Math.round((now - then) / 1000));
  if (s < 45) return "just now";
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const hours = Math.round(m / 60);
  if (hours < 24) return `${hours} h ago`;
  const days = Math.round(hours / 24);
  if (days < 31) return `${days} d ago`;
  return new Date(then).toLocaleDateString();
}

export function timeEl(iso) {
  const exact = new Date(Date.parse(iso));
  return h(
    "time",
    { datetime: iso, title: Number.isNaN(exact.getTime()) ? iso : exact.toString() },
    relative(iso),
  );
}

// Relative times move on by themselves.
export function refreshTimes() {
  for (const el of document.querySelectorAll("time[datetime]")) {
    el.textContent = relative(el.getAttribute("datetime"));
  }
}
