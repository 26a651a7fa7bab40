/**
 * What jsdom lacks and Lumino needs when it loads: `DragEvent`, which
 * @lumino/dragdrop extends at import time. Import this before any Lumino
 * widget module. Not a spec.
 */
if (
  typeof window !== 'undefined' &&
  typeof (window as { DragEvent?: unknown }).DragEvent === 'undefined'
) {
  class DragEvent extends MouseEvent {
    readonly dataTransfer: DataTransfer | null = null;
  }
  Object.assign(window, { DragEvent });
  Object.assign(globalThis, { DragEvent });
}

export {};
