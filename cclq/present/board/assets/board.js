// cclq board: sort and filter the leaderboard table. Rows are rendered in the page;
// this only reorders and hides them, so the page reads fine without JavaScript too.
(function () {
  'use strict';
  var table = document.getElementById('leaderboard');
  if (!table) { return; }
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var headers = Array.prototype.slice.call(table.querySelectorAll('thead th[data-col]'));
  var filter = document.getElementById('filter');
  var count = document.getElementById('count');
  var state = { col: null, dir: 1 };

  function sortKey(row, col) {
    var cell = row.cells[col];
    if (!cell) { return ''; }
    var key = cell.getAttribute('data-sort');
    return key === null ? cell.textContent.trim().toLowerCase() : key;
  }

  function sortBy(th) {
    var col = Number(th.getAttribute('data-col'));
    var numeric = th.getAttribute('data-type') === 'num';
    if (state.col === col) {
      state.dir = -state.dir;
    } else {
      state.col = col;
      // a metric column starts with the best value first; text columns A to Z
      state.dir = th.getAttribute('data-better') === 'higher' ? -1 : 1;
    }
    var dir = state.dir;
    var sorted = rows.slice().sort(function (a, b) {
      var ka = sortKey(a, col);
      var kb = sortKey(b, col);
      if (ka === '' && kb === '') { return 0; }
      if (ka === '') { return 1; }   // n/a always last
      if (kb === '') { return -1; }
      if (numeric) { return dir * (Number(ka) - Number(kb)); }
      return dir * ka.localeCompare(kb, undefined, { numeric: true });
    });
    sorted.forEach(function (row) { tbody.appendChild(row); });
    headers.forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
  }

  function applyFilter() {
    var terms = (filter ? filter.value : '').toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var text = row.getAttribute('data-search') || '';
      var keep = terms.every(function (t) { return text.indexOf(t) !== -1; });
      row.hidden = !keep;
      if (keep) { shown += 1; }
    });
    if (count) {
      count.textContent = terms.length ? shown + ' of ' + rows.length + ' workloads' : rows.length + ' workloads';
    }
  }

  headers.forEach(function (th) {
    var button = th.querySelector('button');
    if (button) { button.addEventListener('click', function () { sortBy(th); }); }
  });
  if (filter) { filter.addEventListener('input', applyFilter); }
  // Column groups: a checkbox per metric category hides it, "+N" in a group's heading
  // shows all its columns, "columns with no value" shows those n/a in every row. The
  // rules are classes on the table (the page's <style>); each group heading then spans
  // the columns of its group that are shown, and is hidden when none is.
  var groupHeads = Array.prototype.slice.call(table.querySelectorAll('thead tr.groups th[data-group]'));
  function relayout() {
    groupHeads.forEach(function (head) {
      var shown = headers.filter(function (th) {
        return th.classList.contains('g-' + head.getAttribute('data-group')) &&
          window.getComputedStyle(th).display !== 'none';
      }).length;
      head.hidden = shown === 0;
      head.colSpan = Math.max(shown, 1);
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll('#groups input[data-group]'), function (box) {
    box.addEventListener('change', function () {
      table.classList.toggle('hide-' + box.getAttribute('data-group'), !box.checked);
      relayout();
    });
  });
  Array.prototype.forEach.call(table.querySelectorAll('button.more-btn'), function (button) {
    var label = button.textContent;
    button.addEventListener('click', function () {
      var open = table.classList.toggle('more-' + button.getAttribute('data-group'));
      button.setAttribute('aria-expanded', open ? 'true' : 'false');
      button.textContent = open ? '\u2212' : label;
      relayout();
    });
  });
  var showEmpty = document.getElementById('show-empty');
  if (showEmpty) {
    showEmpty.addEventListener('change', function () {
      table.classList.toggle('show-empty', showEmpty.checked);
      relayout();
    });
  }
  relayout();
  applyFilter();
}());
