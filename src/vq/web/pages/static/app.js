// vq console: progressive enhancement only; every page works without scripts.
// With scripts on, destructive forms confirm through hx-confirm dialogs, so the no-JS
// confirmation checkboxes (.nojs-confirm) are hidden by the "js" class.
document.documentElement.classList.add("js");

// Log panels show their newest lines: scrolled to the bottom when the page loads and
// whenever htmx swaps in a refreshed log.
(function () {
  function toBottom(root) {
    var scope = root && root.querySelectorAll ? root : document;
    var logs = scope.matches && scope.matches("pre.log") ? [scope] : scope.querySelectorAll("pre.log");
    Array.prototype.forEach.call(logs, function (pre) { pre.scrollTop = pre.scrollHeight; });
  }
  document.addEventListener("DOMContentLoaded", function () { toBottom(document); });
  document.addEventListener("htmx:load", function (event) { toBottom(event.target); });
})();
