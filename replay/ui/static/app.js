/* Which page this is (the shell says), and drawing it. */
"use strict";
(function (R) {
  R.pages.error = function () {
    R.where(String(R.page.status));
    var titles = {400: "Not a valid address", 404: "Not found", 500: "Something went wrong"};
    R.mount(R.el("h1", {}, (titles[R.page.status] || "Not available") + " (" + R.page.status + ")"),
      R.el("p", {class: "error", id: "failure"}, R.page.message), R.link("/", "All runs"));
  };
  if (R.shared) document.getElementById("home").removeAttribute("href");
  var draw = R.pages[R.page.page];
  if (draw) draw(R.page.ids || []);
  else R.fail(new Error("unknown page " + R.page.page));
})(Rewind);
