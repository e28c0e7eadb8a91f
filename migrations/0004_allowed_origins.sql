-- CORS (DESIGN.md §13): the web origins whose pages may call the routes a decision token may use, per client,
-- each exactly as a browser sends it in `Origin` (scheme, host and port; no path, no trailing slash).
alter table api_clients add column allowed_origins text[] not null default '{}';
