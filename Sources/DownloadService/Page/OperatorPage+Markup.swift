// The operator page's markup (`GET /`). Its style and script are in their own files and are
// inlined where `<style>` and `<script>` stand, allowed by their hashes (`OperatorPage`).
extension OperatorPage {
    static func markup(style: String, script: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>Downloads · download-service</title>
        <link rel="icon" href="data:,">
        <style>\(style)</style>
        </head>
        <body>
        <header>
          <h1>Downloads</h1>
          <p id="conn" class="conn" role="status" aria-live="polite">connecting…</p>
        </header>
        <main>
        <section id="auth" class="panel" hidden aria-labelledby="auth-title">
          <h2 id="auth-title">Token</h2>
          <form id="token-form" autocomplete="off">
            <label for="token">This service requires a bearer token (kept in this tab only)</label>
            <div class="line">
              <input id="token" name="token" type="password" spellcheck="false">
              <button type="submit">Use token</button>
              <button type="button" id="forget">Forget</button>
            </div>
          </form>
        </section>
        <section class="panel" aria-labelledby="add-title">
          <h2 id="add-title">Add a URL</h2>
          <form id="add-form" novalidate>
            <label for="url">URL</label>
            <div class="line">
              <input id="url" name="url" type="text" inputmode="url" spellcheck="false" placeholder="https://example.com/file.iso" required>
              <select id="storage" name="storage" aria-label="Storage area">
                <option value="cache">cache</option>
                <option value="persistent">persistent</option>
              </select>
              <button type="submit" id="add">Add</button>
            </div>
            <p id="add-error" class="error" role="alert"></p>
          </form>
        </section>
        <p id="notice" class="error" role="alert"></p>
        <table id="downloads">
          <caption class="sr">Downloads, newest first</caption>
          <thead>
            <tr><th scope="col" class="file">File</th><th scope="col" class="state">State</th>
            <th scope="col" class="progress">Progress</th><th scope="col" class="num">Rate</th>
            <th scope="col" class="num">ETA</th><th scope="col" class="num">Size</th><th scope="col" class="area">Area</th>
            <th scope="col" class="num callers">Callers</th><th scope="col" class="actions">Actions</th></tr>
          </thead>
          <tbody id="rows"></tbody>
        </table>
        <p id="empty" class="empty">No downloads.</p>
        </main>
        <script>\(script)</script>
        </body>
        </html>

        """
    }
}
