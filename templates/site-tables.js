// Sort and filter every data table of the site (<table class="data">) in the browser, offline. Copied to
// <out>/static/site-tables.js; tablesort (static/tablesort.min.js, vendored: perfreport/site/static/README.md)
// moves the rows in place, so cell text is never parsed as markup. This file adds what the site needs on top:
//  - "num": numeric columns (th data-sort-method="num", first click descending) sort on the number each cell
//    shows (thousands separators dropped), or on its data-sort value where it has one (kernel pages);
//  - "text": other columns sort in natural order (k2 before k10), case-insensitive;
//  - a null cell (an em dash, or data-sort="") stays last whichever way its column is sorted;
//  - a filter box above every table of FILTER_MIN_ROWS rows or more: rows holding every typed word stay.
// Kernel pages build their tables in JavaScript and call PerfreportTables.enhance(table) on each.
(function () {
  "use strict";
  var FILTER_MIN_ROWS = 5;
  var DASH = "\u2014";
  var NEVER = function () { return false; };  // never picked by content: columns name their method
  function number(text) { return parseFloat(String(text).replace(/,/g, "")); }

  // tablesort's comparators return (b before a) > 0; it reverses the result for ascending order.
  Tablesort.extend("num", NEVER, function (a, b) {
    var x = number(a), y = number(b);
    if (isNaN(x) || isNaN(y)) return isNaN(x) === isNaN(y) ? 0 : (isNaN(x) ? 1 : -1);
    return y - x;
  });
  Tablesort.extend("text", NEVER, function (a, b) {
    return b.trim().localeCompare(a.trim(), undefined, {numeric: true, sensitivity: "base"});
  });

  function nullsLast(table, sorter) {
    var body = table.tBodies[0];
    var empty = [];
    Array.prototype.forEach.call(body.rows, function (row) {
      var cell = row.cells[sorter.col];
      if (!cell) return;
      var value = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
      if (value === "" || value === DASH) empty.push(row);
    });
    empty.forEach(function (row) { body.appendChild(row); });
  }

  function addFilter(table) {
    var rows = table.tBodies[0].rows;
    var bar = document.createElement("div");
    bar.className = "filter";
    var input = document.createElement("input");
    input.type = "search";
    input.placeholder = "Filter rows";
    input.setAttribute("aria-label", "Filter the rows of this table");
    var count = document.createElement("span");
    count.className = "filter-count";
    input.addEventListener("input", function () {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var text = row.textContent.toLowerCase();
        var keep = words.every(function (w) { return text.indexOf(w) >= 0; });
        row.hidden = !keep;
        if (keep) shown++;
      });
      count.textContent = words.length ? shown + " of " + rows.length + " rows" : "";
    });
    bar.appendChild(input);
    bar.appendChild(count);
    var box = table.parentNode.classList.contains("scroll") ? table.parentNode : table;
    box.parentNode.insertBefore(bar, box);
  }

  function enhance(table) {
    if (table.getAttribute("data-enhanced") || !table.tHead || !table.tBodies.length) return;
    table.setAttribute("data-enhanced", "1");
    Array.prototype.forEach.call(table.tHead.rows[table.tHead.rows.length - 1].cells, function (th) {
      if (!th.getAttribute("data-sort-method")) th.setAttribute("data-sort-method", "text");
    });
    var sorter = new Tablesort(table);
    table.addEventListener("afterSort", function () { nullsLast(table, sorter); });
    if (table.tBodies[0].rows.length >= FILTER_MIN_ROWS) addFilter(table);
  }

  window.PerfreportTables = {enhance: enhance, FILTER_MIN_ROWS: FILTER_MIN_ROWS};
  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.data"), enhance);
  });
})();
