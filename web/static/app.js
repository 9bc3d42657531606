// Switchyard dashboard: drag and drop for board cards, closing the page's live stream when the
// page is left, and opt-in browser notifications of what needs a person. Everything else is htmx
// attributes; a card can also be moved without this script, with its ← → buttons.
(function () {
  "use strict";

  // A browser keeps at most six connections to one site: a page kept in the back/forward cache
  // with its event stream still open would hold one of them. Close the streams when the page is
  // left, and reload a page brought back from that cache (its stream, and what it shows, are old).
  var sources = [];
  htmx.createEventSource = function (url) {
    var source = new EventSource(url, { withCredentials: true });
    sources.push(source);
    watchForNeeds(source, url);
    return source;
  };
  window.addEventListener("pagehide", function () {
    sources.forEach(function (source) { source.close(); });
    sources = [];
  });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) window.location.reload();
  });

  // Browser notifications, opt-in per browser: when the live stream names agents, tasks or
  // wishes, ask /notifications what needs a person since the last ask and show each notice; a
  // click opens the page that answers it.
  var NOTIFY_KEY = "switchyard-notify";
  function notifying() {
    return "Notification" in window && Notification.permission === "granted" && localStorage.getItem(NOTIFY_KEY) === "on";
  }
  var cursor = null, asking = false, again = false;
  function askForNeeds() {
    if (!notifying()) return;
    if (asking) { again = true; return; }
    asking = true;
    var query = cursor === null ? "" : "?after=" + encodeURIComponent(cursor);
    fetch("/notifications" + query, { credentials: "same-origin", headers: { accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (notices) {
        if (!notices) return;
        if (notices.after !== null) cursor = notices.after;
        notices.items.forEach(function (notice) {
          var shown = new Notification(notice.title, { body: notice.body, tag: "switchyard-" + notice.id });
          shown.onclick = function () { window.focus(); window.location.href = notice.link; };
        });
      })
      .catch(function () {})
      .then(function () {
        asking = false;
        if (again) { again = false; askForNeeds(); }
      });
  }
  function watchForNeeds(source, url) {
    // The page was rendered at the event its stream starts after: notices start there too.
    var after = /[?&]after=(\d+)/.exec(url);
    if (after && cursor === null) cursor = after[1];
    ["agents", "tasks", "wishes"].forEach(function (topic) { source.addEventListener(topic, askForNeeds); });
  }
  function showNotifyToggle() {
    var toggle = document.getElementById("notify-toggle");
    if (!toggle || !("Notification" in window)) return;
    toggle.hidden = false;
    toggle.textContent = notifying() ? "Notifications on" : "Notify me";
    toggle.setAttribute("aria-pressed", notifying() ? "true" : "false");
  }
  document.addEventListener("click", function (event) {
    if (!event.target.closest || !event.target.closest("#notify-toggle")) return;
    if (notifying()) {
      localStorage.removeItem(NOTIFY_KEY);
      showNotifyToggle();
      return;
    }
    Notification.requestPermission().then(function (permission) {
      if (permission === "granted") localStorage.setItem(NOTIFY_KEY, "on");
      showNotifyToggle();
    });
  });
  document.addEventListener("DOMContentLoaded", showNotifyToggle);

  // A message from a refused change stays until the next change is tried.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var flash = document.getElementById("flash");
    if (flash && event.detail.requestConfig && event.detail.requestConfig.verb !== "get") flash.innerHTML = "";
  });

  // A live refresh never replaces a part of the page holding a form a person is filling in (a
  // field with the focus, or changed and not sent): the part is refreshed by the next change
  // after that, or when the form is sent.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var config = event.detail.requestConfig;
    var target = event.detail.target;
    if (!target || !config || config.verb !== "get") return;
    var fields = target.querySelectorAll("input, select, textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i] === document.activeElement || changed(fields[i])) {
        event.detail.shouldSwap = false;
        return;
      }
    }
  });

  function changed(field) {
    if (field.type === "hidden" || field.type === "submit" || field.type === "button") return false;
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    if (field.tagName === "SELECT") {
      var options = Array.prototype.slice.call(field.options);
      if (field.multiple) return options.some(function (o) { return o.selected !== o.defaultSelected; });
      // A single choice with none marked `selected` starts at its first option.
      var first = options.findIndex(function (o) { return o.defaultSelected; });
      return field.selectedIndex !== Math.max(first, 0);
    }
    return field.value !== field.defaultValue;
  }

  function csrf() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["x-csrf-token"] || "";
    } catch (e) {
      return "";
    }
  }

  // A movable card is `<li draggable="true" data-card="…">`, naming it as a move does: a task's
  // id, or `wish:<slug>`.
  function cardOf(target) {
    return target.closest ? target.closest("li[draggable='true']") : null;
  }

  document.addEventListener("dragstart", function (event) {
    var card = cardOf(event.target);
    if (!card) return;
    event.dataTransfer.setData("text/plain", card.getAttribute("data-card"));
    event.dataTransfer.effectAllowed = "move";
    card.classList.add("dragging");
  });

  document.addEventListener("dragend", function (event) {
    var card = cardOf(event.target);
    if (card) card.classList.remove("dragging");
    document.querySelectorAll(".drop-target").forEach(function (c) { c.classList.remove("drop-target"); });
  });

  document.addEventListener("dragover", function (event) {
    var column = event.target.closest && event.target.closest("[data-column]");
    if (!column) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    column.classList.add("drop-target");
  });

  document.addEventListener("dragleave", function (event) {
    var column = event.target.closest && event.target.closest("[data-column]");
    if (column && !column.contains(event.relatedTarget)) column.classList.remove("drop-target");
  });

  document.addEventListener("drop", function (event) {
    var column = event.target.closest && event.target.closest("[data-column]");
    var board = column && column.closest("[data-board]");
    if (!column || !board) return;
    event.preventDefault();
    column.classList.remove("drop-target");
    var card = event.dataTransfer.getData("text/plain");
    if (!card || column.querySelector("[data-card=\"" + CSS.escape(card) + "\"]")) return;
    htmx.ajax("POST", "/boards/" + board.getAttribute("data-board") + "/move", {
      source: column,
      target: "#board",
      select: "#board",
      swap: "outerHTML",
      values: { card: card, column_id: column.getAttribute("data-column") },
      headers: { "x-csrf-token": csrf() }
    });
  });
})();

// A person's review on the wish page: a click on a diff line (or its + button) opens a comment
// box under it, whose text goes with the review form as `comment_at` (the line's `file:line`)
// then `comment`. Without this script the review's notes field still works.
(function () {
  "use strict";
  var made = 0;
  document.addEventListener("click", function (event) {
    var row = event.target.closest && event.target.closest("tr[data-at]");
    if (!row || !row.closest("form#review") || event.target.closest("textarea")) return;
    var next = row.nextElementSibling;
    if (next && next.classList.contains("comment-row")) {
      next.querySelector("textarea").focus();
      return;
    }
    var at = row.getAttribute("data-at");
    made += 1;
    var line = document.createElement("tr");
    line.className = "comment-row";
    var cell = document.createElement("td");
    cell.colSpan = 3;
    var label = document.createElement("label");
    label.htmlFor = "comment-" + made;
    label.textContent = "Comment on " + at;
    var place = document.createElement("input");
    place.type = "hidden";
    place.name = "comment_at";
    place.value = at;
    var text = document.createElement("textarea");
    text.id = "comment-" + made;
    text.name = "comment";
    text.rows = 2;
    cell.append(label, place, text);
    line.append(cell);
    row.after(line);
    text.focus();
  });
})();
