// dataloader dashboard script: served as a file so the Content-Security-Policy
// needs no inline script.
