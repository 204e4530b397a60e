// The iterion .bot extension: starts `iterion lsp` (stdio) for .bot/.iter files.
"use strict";
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("iterion");
  const command = config.get("command", "iterion");
  const args = config.get("args", ["lsp"]);
  const run = { command, args, transport: TransportKind.stdio };
  client = new LanguageClient(
    "iterion",
    "iterion language server",
    { run, debug: run },
    { documentSelector: [{ scheme: "file", language: "bot" }, { scheme: "untitled", language: "bot" }] }
  );
  client.start().catch((err) => {
    vscode.window.showErrorMessage(
      `iterion: could not start "${command} ${args.join(" ")}" (${err.message}); ` +
        "set iterion.command to the iterion executable (e.g. a virtualenv's bin/iterion)."
    );
  });
  context.subscriptions.push({ dispose: () => client && client.stop() });
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("iterion")) {
        vscode.window.showInformationMessage("iterion: reload the window to apply the new server command.");
      }
    })
  );
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
