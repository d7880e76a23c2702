// Pieces the repository pages share: links, cards, diffs, state tabs and pagers.
import { h } from "./dom.js";

export const q = encodeURIComponent;
export const repoHash = (owner, name) => `#/r/${q(owner)}/${q(name)}`;
export const PAGE = 30;

export function section(title, ...body) {
  return h("section", { class: "card" }, h("h2", {}, title), ...body);
}

// "owner/name" (a link) and what follows it, above a repository's pages.
export function crumbs(owner, name, ...rest) {
  return h("p", { class: "crumbs" }, h("a", { href: repoHash(owner, name) }, `${owner}/${name}`), ...rest);
}

// A patch with its added and removed lines marked: one text node per line.
export function diff(patch) {
  return h(
    "pre",
    { class: "diff" },
    patch.split("\n").map((line) => {
      const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      return h("span", { class: kind }, line + "\n");
    }),
  );
}

// The files of a diff (a commit's or a pull request's), each with its patch.
export function diffFiles(files) {
  return files.map((f) =>
    h(
      "div",
      { class: "pr-file" },
      h(
        "p",
        { class: "mono" },
        h("strong", {}, f.path),
        f.oldPath && f.oldPath !== f.path ? ` (from ${f.oldPath})` : "",
        ` ${f.status} `,
        h("span", { class: "plus" }, `+${f.additions}`),
        " ",
        h("span", { class: "minus" }, `−${f.deletions}`),
      ),
      f.binary ? h("p", { class: "muted" }, "binary file") : diff(f.patch || ""),
      f.truncated ? h("p", { class: "muted" }, "(cut: too large to show in full)") : null,
    ),
  );
}

// Tabs that link to the same list in another state; the current one is marked.
export function stateTabs(base, states, current) {
  return h(
    "nav",
    { class: "tabs", id: "states", "aria-label": "State" },
    states.map((s) =>
      h("a", { href: `${base}?state=${s}`, class: s === current ? "current" : "", "aria-current": s === current ? "page" : null }, s),
    ),
  );
}

// Newer / page n / Older links; `href(page)` builds a page's link.
export function pager(page, hasMore, href) {
  if (page <= 1 && !hasMore) return null;
  return h(
    "nav",
    { class: "pager", id: "pager", "aria-label": "Pages" },
    page > 1 ? h("a", { href: href(page - 1), rel: "prev", id: "prev" }, "← Newer") : h("span", {}),
    h("span", { class: "muted" }, `page ${page}`),
    hasMore ? h("a", { href: href(page + 1), rel: "next", id: "next" }, "Older →") : h("span", {}),
  );
}

// The page number of a list's hash (?page=n), 1 when absent or nonsense.
export function pageOf(params) {
  const n = Number.parseInt(params.get("page") || "1", 10);
  return Number.isFinite(n) && n > 0 ? n : 1;
}

// HTML the server rendered from Markdown and sanitized (nh3: bodyHtml, a README's html);
// the page's CSP is the second line: no inline script runs and no other origin is reached.
export function markdown(html, attrs = {}) {
  const div = h("div", { class: "markdown", ...attrs });
  div.innerHTML = html;
  return div;
}

// An issue's, a comment's or a review's body: rendered when the server sent bodyHtml.
export function body(item, empty = "No description provided.") {
  if (item.bodyHtml) return markdown(item.bodyHtml);
  if (item.body) return h("div", { class: "markdown" }, h("p", {}, item.body));
  return h("p", { class: "muted" }, empty);
}

// A label as a coloured chip: its own colour (six hex digits) when the repository gave it
// one, else a hue from its name, so "bug" looks the same everywhere.
export function labelChip(name, color) {
  const chip = h("span", { class: "label" }, name);
  // CSSOM, not a style attribute: allowed under style-src 'self'.
  if (/^[0-9a-fA-F]{6}$/.test(color || "")) {
    const n = Number.parseInt(color, 16);
    const light = 0.299 * (n >> 16) + 0.587 * ((n >> 8) & 255) + 0.114 * (n & 255) > 150;
    chip.classList.add("coloured");
    chip.style.setProperty("--label-bg", `#${color}`);
    chip.style.setProperty("--label-fg", light ? "#1f2328" : "#ffffff");
    return chip;
  }
  let hue = 0;
  for (const c of String(name)) hue = (hue * 31 + c.codePointAt(0)) % 360;
  chip.style.setProperty("--hue", String(hue));
  return chip;
}

export const userHash = (username) => `#/u/${q(username)}`;

export function userLink(user) {
  const name = (user && user.username) || "ghost";
  return h("a", { href: userHash(name), class: "user" }, name);
}

// A comma-separated field into a list, blanks and repeats dropped.
export function words(text) {
  return [...new Set(String(text).split(",").map((w) => w.trim()).filter(Boolean))];
}
