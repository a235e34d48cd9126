// Starts `hdsl lsp` (the language server: errors as you type, hover, go to
// definition, references, outline, completion, formatting) for .hl files.
// Highlighting, snippets and brackets work without it; if `hdsl` is not found,
// a warning says how to point the setting hdsl.server.path at it.
'use strict';
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;

async function activate(context) {
  const config = vscode.workspace.getConfiguration('hdsl');
  if (!config.get('server.enable', true)) {
    return;
  }
  const command = config.get('server.path', 'hdsl');
  client = new LanguageClient('hdsl', 'hdsl language server', { command, args: ['lsp'] }, {
    documentSelector: [{ scheme: 'file', language: 'hdsl' }, { scheme: 'untitled', language: 'hdsl' }],
  });
  context.subscriptions.push(client);
  try {
    await client.start();
  } catch (err) {
    vscode.window.showWarningMessage(
      `hdsl: could not start \`${command} lsp\` (${err.message}). Install hdsl with its language server ` +
      `(pip install 'hdsl[lsp]') or set "hdsl.server.path" to the hdsl executable.`);
  }
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
