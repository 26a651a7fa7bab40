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
