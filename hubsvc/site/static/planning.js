// Planning on the page: reactions under an issue, pull request or comment, the milestone
// an issue belongs to, and a repository's releases with their assets.
import { del, get, post, repoPath } from "./api.js";
import { h, mount, timeEl } from "./dom.js";
import { crumbs, q, userLink } from "./views.js";

const EMOJI = {
  "+1": "👍",
  "-1": "👎",
  laugh: "😄",
  confused: "😕",
  heart: "❤️",
  hooray: "🎉",
  rocket: "🚀",
  eyes: "👀",
};

// The counts of an object's reactions and, for a signed-in person, a toggle per kind:
// POST …/reactions {content}, or DELETE of their own (found by ?content=).
export function reactionBar(me, base, counts, id) {
  counts = counts || {};
  const bar = h("div", { class: "reactions", id });
  const render = () => {
    const shown = Object.keys(EMOJI).filter((k) => counts[k]);
    // replaceChildren would write null as the text "null": the picker only when signed in.
    bar.replaceChildren(...shown.map((k) => chip(k)), ...(me ? [picker()] : []));
  };
  const toggle = async (kind) => {
    const mine = (await get(`${base}?content=${q(kind)}&limit=100`)).reactions.find(
      (r) => r.user && r.user.username === me.username,
    );
    counts[kind] = (counts[kind] || 0) + (mine ? -1 : 1); // shown now; the event re-reads it
    render();
    if (mine) await del(`${base}/${q(mine.id)}`);
    else await post(base, { content: kind });
  };
  const chip = (kind) => {
    const b = h("button", { type: "button", class: "reaction", "data-content": kind, "aria-label": `${kind} (${counts[kind]})` }, `${EMOJI[kind]} ${counts[kind]}`);
    if (me) b.addEventListener("click", () => toggle(kind).catch(() => {}));
    else b.disabled = true;
    return b;
  };
  const picker = () => {
    const menu = h(
      "span",
      { class: "reaction-menu", hidden: true },
      Object.entries(EMOJI).map(([kind, emoji]) => {
        const b = h("button", { type: "button", class: "reaction-pick", "data-content": kind, "aria-label": kind, title: kind }, emoji);
        b.addEventListener("click", () => {
          menu.hidden = true;
          toggle(kind).catch(() => {});
        });
        return b;
      }),
    );
    const open = h("button", { type: "button", class: "reaction add-reaction", "aria-label": "Add a reaction", title: "Add a reaction" }, "☺ +");
    open.addEventListener("click", () => (menu.hidden = !menu.hidden));
    return h("span", { class: "reaction-picker" }, open, menu);
  };
  render();
  return bar;
}

// The milestone block's select: PATCH {milestone: number | null}.
export async function milestoneSelect(owner, name, current, save) {
  const data = await get(`${repoPath(owner, name)}/milestones?state=open&limit=100`).catch(() => ({}));
  const list = data.milestones || [];
  const select = h(
    "select",
    { id: "milestone-select", "aria-label": "Milestone" },
    h("option", { value: "" }, "No milestone"),
    list.map((m) => h("option", { value: m.number, selected: current && current.number === m.number }, m.title)),
  );
  select.addEventListener("change", () => save(select.value ? Number(select.value) : null));
  return select;
}

const size = (n) => (n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);

// An asset's download link as a path of this server (the page links nowhere else).
const pathOf = (url) => {
  try {
    const u = new URL(url, location.href);
    return u.pathname + u.search;
  } catch (_) {
    return "#/";
  }
};

// #/r/owner/name/releases: newest first, drafts to writers, with assets and downloads.
export async function showReleases(owner, name) {
  const data = await get(`${repoPath(owner, name)}/releases?limit=30`);
  const releases = data.releases || [];
  mount(
    crumbs(owner, name),
    h("h1", {}, "Releases"),
    releases.length
      ? h(
          "ol",
          { class: "releases", id: "releases" },
          releases.map((r) =>
            h(
              "li",
              { class: "card release" },
              h(
                "h2",
                {},
                r.name || r.tagName,
                " ",
                h("code", { class: "tag" }, r.tagName),
                r.draft ? h("span", { class: "badge" }, "draft") : null,
                r.prerelease ? h("span", { class: "badge pre" }, "pre-release") : null,
              ),
              h("p", { class: "muted" }, userLink(r.author), " ", r.publishedAt ? ["published ", timeEl(r.publishedAt)] : "not published"),
              r.body ? h("div", { class: "markdown release-body" }, h("p", {}, r.body)) : null,
              r.assets.length
                ? h(
                    "ul",
                    { class: "list assets" },
                    r.assets.map((a) =>
                      h(
                        "li",
                        { class: "asset" },
                        h("a", { href: pathOf(a.browserDownloadUrl), download: a.name }, a.name),
                        h("span", { class: "muted" }, ` ${size(a.size)} · ${a.downloadCount} download${a.downloadCount === 1 ? "" : "s"}`),
                      ),
                    ),
                  )
                : h("p", { class: "muted" }, "No assets."),
            ),
          ),
        )
      : h("p", { class: "muted" }, "No releases yet."),
  );
}
