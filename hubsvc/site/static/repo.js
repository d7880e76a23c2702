// A repository (files, branches, commits, issues, pull requests), the user's
// repositories, and search: all text nodes, from the public API.
import { get, repoPath } from "./api.js";
import { h, mount } from "./dom.js";
import { branchPicker, commitList, showCommit, showCommits } from "./history.js";
import { showThread, showThreads, threadList } from "./threads.js";
import { crumbs, q, repoHash, section } from "./views.js";

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

async function showFile(owner, name, branch, path) {
  const file = (await get(`${repoPath(owner, name)}/file?branch=${q(branch)}&path=${q(path)}`)).file;
  let body = file.content;
  if (file.truncated) body = `(${file.size} bytes: too large to show)`;
  else if (file.isBinary) body = `(binary file, ${file.size} bytes)`;
  mount(crumbs(owner, name, ` / ${branch} / ${path}`), h("pre", { class: "file", id: "file" }, body));
}

// A card's title with a link to the whole list.
const more = (title, href, label) => h("span", { class: "more-link" }, title, " ", h("a", { href }, label));

async function showOverview(owner, name, rest) {
  const base = repoPath(owner, name);
  const repo = (await get(base)).repo;
  const branch = rest[0] === "tree" && rest[1] ? rest[1] : repo.defaultBranch || "main";
  const dir = rest[0] === "tree" ? rest.slice(2).join("/") : "";
  const [tree, branches, commits, issues, pulls, readme] = await Promise.all(
    [
      `${base}/tree?branch=${q(branch)}&path=${q(dir)}`,
      `${base}/branches?limit=100`,
      `${base}/commits?branch=${q(branch)}&limit=10`,
      `${base}/issues?state=open&limit=10`,
      `${base}/pulls?state=open&limit=10`,
      `${base}/readme?branch=${q(branch)}`,
    ].map((p) => get(p).catch(() => ({}))),
  );
  const home = repoHash(owner, name);
  const atBranch = (b) => `${home}/tree/${q(b)}`;
  const files = tree.files || [];
  const link = (f) =>
    h(
      "a",
      { href: `${home}/${f.type === "dir" ? "tree" : "blob"}/${q(branch)}/${f.path.split("/").map(q).join("/")}` },
      f.type === "dir" ? `${f.name}/` : f.name,
    );
  const up = dir ? h("li", {}, h("a", { href: `${atBranch(branch)}/${dir.split("/").slice(0, -1).map(q).join("/")}` }, "../")) : null;
  mount(
    h("h1", {}, `${owner}/${name}`, repo.private ? h("span", { class: "badge" }, "private") : null),
    repo.description ? h("p", { class: "desc" }, repo.description) : null,
    h("div", { class: "toolbar" }, branchPicker(branches.branches || [], branch, atBranch), dir ? h("span", { class: "mono" }, `/${dir}`) : null),
    h(
      "div",
      { class: "grid" },
      section(
        "Files",
        files.length || up
          ? h("ul", { class: "list mono", id: "tree" }, up, files.map((f) => h("li", {}, link(f))))
          : h("p", { class: "muted" }, "Empty repository."),
      ),
      section(
        "Branches",
        h(
          "ul",
          { class: "list mono", id: "branches" },
          (branches.branches || []).map((b) =>
            h("li", {}, h("a", { href: atBranch(b.name), class: b.name === branch ? "current" : "" }, b.name), b.isDefault ? h("span", { class: "badge" }, "default") : null),
          ),
        ),
      ),
      section(
        more("Recent commits", `${home}/commits/${q(branch)}`, "all →"),
        commitList(commits.commits || [], owner, name),
      ),
      section(
        more("Open issues", `${home}/issues?state=open`, "all →"),
        threadList(issues.issues || [], owner, name, "issues", "No open issues."),
      ),
      section(
        more("Open pull requests", `${home}/pulls?state=open`, "all →"),
        threadList(pulls.pullRequests || [], owner, name, "pulls", "No open pull requests."),
      ),
    ),
    readme.html !== undefined ? section(readme.path, markdown(readme.html)) : null,
  );
}

// #/r/owner/name[/tree/branch/dir | /blob/branch/path | /commits[/branch] | /commit/oid |
// /issues[/n] | /pulls[/n]], with ?state= and ?page= for the lists.
export async function showRepo(owner, name, rest, params) {
  const [what, arg] = rest;
  if ((what === "issues" || what === "pulls") && arg) return showThread(owner, name, what, arg);
  if (what === "issues" || what === "pulls") return showThreads(owner, name, what, params);
  if (what === "commits") return showCommits(owner, name, arg, params);
  if (what === "commit" && arg) return showCommit(owner, name, arg);
  if (what === "blob" && arg) return showFile(owner, name, arg, rest.slice(2).join("/"));
  return showOverview(owner, name, rest);
}
