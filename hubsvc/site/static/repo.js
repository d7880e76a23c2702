// A repository (files, branches, commits, issues, pull requests), the user's
// repositories, and search: all text nodes, from the public API.
import { get, repoPath } from "./api.js";
import { h, mount, timeEl } from "./dom.js";

const repoHash = (owner, name) => `#/r/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
const q = encodeURIComponent;

function repoItem(repo) {
  const owner = (repo.owner && repo.owner.username) || String(repo.fullName || "").split("/")[0];
  return h(
    "li",
    { class: "item" },
    h("a", { href: repoHash(owner, repo.name), class: "repo" }, `${owner}/${repo.name}`),
    repo.private ? h("span", { class: "badge" }, "private") : null,
    h("span", { class: "muted" }, ` ★ ${repo.starCount ?? 0}`),
    repo.description ? h("p", { class: "desc" }, repo.description) : null,
  );
}

export async function showRepos(me) {
  const [own, stars] = await Promise.all([
    get(`/api/users/${q(me.username)}/repositories?limit=100`),
    get(`/api/users/${q(me.username)}/starred?limit=100`),
  ]);
  const list = (repos, id) =>
    repos.length ? h("ul", { class: "list", id }, repos.map(repoItem)) : h("p", { class: "muted", id }, "None yet.");
  mount(
    h("h1", {}, "Your repositories"),
    list(own.repositories || [], "own"),
    h("h1", {}, "Starred"),
    list(stars.repositories || [], "starred"),
  );
}

export async function showSearch(text, type) {
  const input = h("input", { id: "q", type: "search", value: text, placeholder: "Search", "aria-label": "Search" });
  const kind = h(
    "select",
    { id: "kind", "aria-label": "What to search" },
    ["repositories", "issues", "pulls", "users"].map((t) => h("option", { value: t, selected: t === type }, t)),
  );
  const form = h("form", { class: "search" }, input, kind, h("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = `#/search/${q(input.value)}/${kind.value}`;
  });
  const results = h("ul", { class: "list", id: "results" });
  mount(h("h1", {}, "Search"), form, results);
  if (!text) return;
  const data = await get(`/api/search?q=${q(text)}&type=${q(type)}&limit=30`);
  for (const r of data.results || []) {
    if (type === "repositories") results.append(repoItem(r));
    else if (type === "users") results.append(h("li", { class: "item" }, r.username, " ", h("span", { class: "muted" }, r.name || "")));
    else {
      const repo = r.repository || {};
      const kindPath = type === "pulls" ? "pulls" : "issues";
      results.append(
        h(
          "li",
          { class: "item" },
          h("a", { href: `${repoHash(repo.owner, repo.name)}/${kindPath}/${r.number}` }, `#${r.number} ${r.title}`),
          h("span", { class: "muted" }, ` ${repo.owner}/${repo.name}`),
        ),
      );
    }
  }
  if (!results.children.length) results.append(h("li", { class: "muted" }, "Nothing found."));
}

// The README's HTML was rendered and sanitized by the server (GET …/readme, nh3); the
// page's CSP is the second line: no inline script runs and no other origin is reached.
function markdown(html) {
  const div = h("div", { class: "markdown", id: "readme" });
  div.innerHTML = html;
  return div;
}

// A patch with its added and removed lines marked: one text node per line.
function diff(patch) {
  return h(
    "pre",
    { class: "diff" },
    patch.split("\n").map((line) => {
      const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      return h("span", { class: kind }, line + "\n");
    }),
  );
}

function section(title, ...body) {
  return h("section", { class: "card" }, h("h2", {}, title), ...body);
}

function issueList(items, owner, name, kind) {
  if (!items.length) return h("p", { class: "muted" }, `No open ${kind === "pulls" ? "pull requests" : "issues"}.`);
  return h(
    "ul",
    { class: "list" },
    items.map((it) =>
      h(
        "li",
        { class: "item" },
        h("a", { href: `${repoHash(owner, name)}/${kind}/${it.number}` }, `#${it.number} ${it.title}`),
        " ",
        timeEl(it.createdAt),
      ),
    ),
  );
}

async function showThread(owner, name, kind, number) {
  const base = `${repoPath(owner, name)}/${kind}/${q(number)}`;
  const data = await get(base);
  const item = data.issue || data.pullRequest || data;
  const comments = (await get(`${base}/comments`).catch(() => ({}))).comments || [];
  const parts = [
    h("p", {}, h("a", { href: repoHash(owner, name) }, `${owner}/${name}`)),
    h("h1", {}, `#${item.number} ${item.title}`),
    h("p", { class: "muted" }, `${item.state} · `, (item.author && item.author.username) || "", " · ", timeEl(item.createdAt)),
    h("pre", { class: "body" }, item.body || ""),
    section(
      "Comments",
      comments.length
        ? h("ul", { class: "list" }, comments.map((c) => h("li", { class: "item" }, h("strong", {}, (c.author && c.author.username) || "?"), " ", timeEl(c.createdAt), h("pre", { class: "body" }, c.body || ""))))
        : h("p", { class: "muted" }, "No comments."),
    ),
  ];
  if (kind === "pulls") {
    const files = (await get(`${base}/files`).catch(() => ({}))).files || [];
    parts.push(
      section(
        `Files changed (${files.length})`,
        files.map((f) =>
          h(
            "div",
            { class: "pr-file" },
            h("p", { class: "mono" }, h("strong", {}, f.path), ` ${f.status} +${f.additions} −${f.deletions}`),
            f.binary ? h("p", { class: "muted" }, "binary file") : diff(f.patch || ""),
          ),
        ),
      ),
    );
  }
  mount(...parts);
}

async function showFile(owner, name, branch, path) {
  const file = (await get(`${repoPath(owner, name)}/file?branch=${q(branch)}&path=${q(path)}`)).file;
  let body = file.content;
  if (file.truncated) body = `(${file.size} bytes: too large to show)`;
  else if (file.isBinary) body = `(binary file, ${file.size} bytes)`;
  mount(
    h("p", {}, h("a", { href: repoHash(owner, name) }, `${owner}/${name}`), ` / ${path}`),
    h("pre", { class: "file", id: "file" }, body),
  );
}

export async function showRepo(owner, name, rest) {
  if (rest[0] === "issues" || rest[0] === "pulls") return showThread(owner, name, rest[0], rest[1]);
  const base = repoPath(owner, name);
  const repo = (await get(base)).repo;
  const branch = rest[0] === "blob" || rest[0] === "tree" ? rest[1] : repo.defaultBranch || "main";
  if (rest[0] === "blob") return showFile(owner, name, branch, rest.slice(2).join("/"));
  const dir = rest[0] === "tree" ? rest.slice(2).join("/") : "";
  const [tree, branches, commits, issues, pulls, readme] = await Promise.all(
    [
      `${base}/tree?branch=${q(branch)}&path=${q(dir)}`,
      `${base}/branches`,
      `${base}/commits?branch=${q(branch)}&limit=10`,
      `${base}/issues?state=open&limit=10`,
      `${base}/pulls?state=open&limit=10`,
      `${base}/readme?branch=${q(branch)}`,
    ].map((p) => get(p).catch(() => ({}))),
  );
  const files = tree.files || [];
  const link = (f) =>
    h(
      "a",
      { href: `${repoHash(owner, name)}/${f.type === "dir" ? "tree" : "blob"}/${q(branch)}/${f.path.split("/").map(q).join("/")}` },
      f.type === "dir" ? `${f.name}/` : f.name,
    );
  mount(
    h("h1", {}, `${owner}/${name}`, repo.private ? h("span", { class: "badge" }, "private") : null),
    repo.description ? h("p", { class: "desc" }, repo.description) : null,
    h("div", { class: "grid" },
      section(
        "Files",
        files.length
          ? h("ul", { class: "list mono" }, files.map((f) => h("li", {}, link(f))))
          : h("p", { class: "muted" }, "Empty repository."),
      ),
      section("Branches", h("ul", { class: "list mono" }, (branches.branches || []).map((b) => h("li", {}, b.name)))),
      section(
        "Recent commits",
        h("ul", { class: "list" }, (commits.commits || []).map((c) => h("li", { class: "item" }, h("code", {}, String(c.oid || c.sha || "").slice(0, 7)), " ", String(c.message || "").split("\n")[0]))),
      ),
      section("Open issues", issueList(issues.issues || [], owner, name, "issues")),
      section("Open pull requests", issueList(pulls.pullRequests || [], owner, name, "pulls")),
    ),
    readme.html !== undefined ? section(readme.path, markdown(readme.html)) : null,
  );
}
