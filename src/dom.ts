/**
 * A small element builder, so the panel's markup reads as a tree and every
 * element gets its stable class or `data-testid` where it is made.
 */

/** Attributes: `class`, `testid` (-> data-testid), `data-*`, or any DOM attribute. */
export type Attributes = {
  [name: string]: string | number | boolean | undefined | null;
};

/** Children: elements, text, or nothing. */
export type Child = Node | string | number | null | undefined | false;

/** Create an element with attributes and children. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (name === 'class') {
      node.className = String(value);
    } else if (name === 'testid') {
      node.dataset.testid = String(value);
    } else if (value === true) {
      node.setAttribute(name, '');
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, ...children);
  return node;
}

/** Append children, skipping empty ones. */
export function append(parent: Node, ...children: (Child | Child[])[]): void {
  const flat: Child[] = [];
  for (const child of children) {
    if (Array.isArray(child)) {
      flat.push(...child);
    } else {
      flat.push(child);
    }
  }
  for (const child of flat) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    parent.appendChild(
      child instanceof Node ? child : document.createTextNode(String(child))
    );
  }
}

/** Replace all children of a node. */
export function replaceChildren(
  parent: Element,
  ...children: (Child | Child[])[]
): void {
  while (parent.firstChild) {
    parent.removeChild(parent.firstChild);
  }
  append(parent, ...children);
}

/** A number written with an exponent (`1.83e-11`), which a browser may break after its `-`. */
const EXPONENT_NUMBER = /-?\d[\d.]*e[+-]\d+/g;

/**
 * `text` as children in which every number with an exponent is one unbreakable
 * span (`jp-gradcheck-number`), so a line never breaks inside a number.
 */
export function wholeNumbers(text: string): (string | HTMLElement)[] {
  const parts: (string | HTMLElement)[] = [];
  let last = 0;
  for (const match of text.matchAll(EXPONENT_NUMBER)) {
    const start = match.index ?? 0;
    if (start > last) {
      parts.push(text.slice(last, start));
    }
    parts.push(el('span', { class: 'jp-gradcheck-number' }, match[0]));
    last = start + match[0].length;
  }
  if (last < text.length) {
    parts.push(text.slice(last));
  }
  return parts;
}
